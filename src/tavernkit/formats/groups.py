"""SillyTavern group files (``groups/<id>.json``) and group chats (``group chats/<id>.jsonl``).

A group file is one JSON object written with a 4-space indent; a group chat is an ordinary
chat file (header line, one message per line) whose character messages carry the speaker's
``original_avatar``. Reading a
group file keeps every key and their order, so read -> write gives SillyTavern's bytes back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tavernkit.errors import FormatError
from tavernkit.formats.file_io import dump_json
from tavernkit.models.chat import Chat
from tavernkit.models.group import Group

__all__ = [
    "GROUP_CHAT_NAME",
    "group_to_json",
    "is_group_chat",
    "is_group_file",
    "read_group",
]

#: The names a group chat's header carries in SillyTavern (``saveGroupChat``).
GROUP_CHAT_NAME = "unused"

# Keys a group file always has and no card, lorebook, preset or settings file has together.
_GROUP_KEYS = frozenset({"members", "activation_strategy"})
_GROUP_MARKERS = frozenset({"chat_id", "chats", "generation_mode", "disabled_members"})


def is_group_file(value: Any) -> bool:
    """Whether a parsed JSON value is a group file: ``members`` (a list of strings) and
    ``activation_strategy`` plus one of the other group keys, and none of a card's."""
    if not isinstance(value, Mapping) or not value.keys() >= _GROUP_KEYS:
        return False
    members = value.get("members")
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        return False
    return bool(_GROUP_MARKERS & value.keys()) and "spec" not in value and "entries" not in value


def read_group(data: bytes | str, *, source: str = "<group>") -> Group:
    """A group file's :class:`Group`; a file that is not JSON, not an object, or whose fields
    have the wrong types is a :class:`~tavernkit.errors.FormatError` naming the field."""
    try:
        value = json.loads(data.decode("utf-8-sig") if isinstance(data, bytes) else data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"not a JSON group file: {exc}", source=source) from None
    if not isinstance(value, dict):
        raise FormatError("a group file holds one JSON object", source=source)
    try:
        return Group.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise FormatError(error["msg"], source=source, field=where) from None


def group_to_json(group: Group) -> bytes:
    """The group file as SillyTavern writes it (``JSON.stringify(group, null, 4)``)."""
    return dump_json(group.to_wire()).encode("utf-8")


def is_group_chat(chat: Chat) -> bool:
    """Whether a chat reads as a group chat: SillyTavern sets ``original_avatar`` (the
    speaker) on character messages in groups only, and 1.18 writes ``"unused"`` names in every
    chat header, so the messages tell, not the header."""
    header = chat.header
    if header.character_name not in (None, "", GROUP_CHAT_NAME):
        return False
    return any(m.original_avatar for m in chat.messages if not m.is_user)
