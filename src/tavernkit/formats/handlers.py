"""The built-in formats as registry handlers: a cheap detector, a reader and (where we write
the format) a writer per format. ``tavernkit.plugins.builtin`` registers them through the same
``register_formats`` hook third-party formats use.

Detectors look at bytes only and never raise; JSON is parsed once per file and shared between
the detectors through a small cache (every detector sees every imported file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePath
from typing import Any

import yaml

from tavernkit.errors import FormatError
from tavernkit.formats.cards import (
    ImportedCard,
    card_to_charx,
    card_to_json,
    card_to_png,
    read_card,
)
from tavernkit.formats.charx import is_zip
from tavernkit.formats.chatluna import is_chatluna_preset, read_chatluna_preset, write_chatluna
from tavernkit.formats.chats import chat_to_jsonl, is_chat_jsonl, read_chat_jsonl
from tavernkit.formats.file_io import dump_json
from tavernkit.formats.groups import group_to_json, is_group_file, read_group
from tavernkit.formats.lorebooks import is_lorebook, lorebook_to_bytes, read_lorebook
from tavernkit.formats.png import is_png, read_text_chunks
from tavernkit.formats.presets import preset_kind, preset_to_json, read_preset
from tavernkit.formats.settings import is_st_settings, read_st_settings
from tavernkit.models.character import Card, Character
from tavernkit.models.chat import Chat
from tavernkit.models.group import Group
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.quick_reply import QuickReplySet

__all__ = ["BUILTIN_FORMATS", "BuiltinFormat"]

_CARD_CHUNKS = frozenset({"chara", "ccv3"})
_CARD_KEYS = frozenset({"spec", "char_name", "first_mes", "mes_example", "char_greeting"})


class _Missing:
    pass


_NOT_JSON = _Missing()


@lru_cache(maxsize=4)
def _json(data: bytes) -> Any:
    """The parsed JSON of ``data`` (``_NOT_JSON`` when it is not JSON); cached because every
    detector sees every file. Callers must not mutate the value."""
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith((b"{", b"[")):
        return _NOT_JSON
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _NOT_JSON


def _stem(source: str) -> str | None:
    name = PurePath(source).stem
    return name if name and not name.startswith("<") else None


# --- cards -------------------------------------------------------------------------------


def _is_png_card(data: bytes) -> bool:
    if not is_png(data):
        return False
    try:
        chunks = read_text_chunks(data, keywords=_CARD_CHUNKS)
    except FormatError:
        # A PNG whose card chunk is broken is still a card file: reading it reports why.
        return True
    return bool(chunks)


def _is_charx(data: bytes) -> bool:
    return is_zip(data)


def _is_json_card(data: bytes) -> bool:
    value = _json(data)
    if not isinstance(value, dict):
        return False
    if "entries" in value or "prompts" in value or "power_user" in value:
        return False
    if value.get("spec") in ("chara_card_v2", "chara_card_v3"):
        return True
    return bool(_CARD_KEYS & value.keys()) and ("name" in value or "char_name" in value)


def _is_yaml_card(data: bytes) -> bool:
    if _json(data) is not _NOT_JSON or is_png(data) or is_zip(data) or b"\x00" in data[:1024]:
        return False
    try:
        value = yaml.safe_load(data)
    except yaml.YAMLError:
        return False
    return (
        isinstance(value, dict) and "name" in value and ("context" in value or "greeting" in value)
    )


def _read_card(data: bytes, source: str) -> ImportedCard:
    return read_card(data, source=source)


def _write_card_png(value: Card | Character, *, image: bytes | None = None, **_: Any) -> bytes:
    return card_to_png(value, image)


def _write_card_json(value: Card | Character, *, spec: str = "v2", **_: Any) -> bytes:
    return (dump_json(card_to_json(value, spec="v3" if spec == "v3" else "v2")) + "\n").encode()


def _write_card_charx(
    value: Card | Character,
    *,
    image: bytes | None = None,
    assets: Mapping[str, bytes] | None = None,
    extra_files: Mapping[str, bytes] | None = None,
    **_: Any,
) -> bytes:
    return card_to_charx(value, image, assets, extra_files=extra_files)


# --- the rest ------------------------------------------------------------------------------


def _is_lorebook(data: bytes) -> bool:
    value = _json(data)
    return isinstance(value, dict) and not _is_json_card(data) and is_lorebook(value)


def _read_lorebook(data: bytes, source: str) -> Lorebook:
    return read_lorebook(data, source=source, name=_stem(source))


def _write_lorebook(value: Lorebook, **_: Any) -> bytes:
    return lorebook_to_bytes(value)


def _is_preset(data: bytes) -> bool:
    value = _json(data)
    return isinstance(value, dict) and preset_kind(value) is not None


def _read_preset(data: bytes, source: str) -> Any:
    return read_preset(data, source=source)


def _write_preset(value: Any, **_: Any) -> bytes:
    return (dump_json(preset_to_json(value)) + "\n").encode()


def _is_settings(data: bytes) -> bool:
    return is_st_settings(_json(data))


def _read_settings(data: bytes, source: str) -> Any:
    return read_st_settings(data, source=source)


def _is_group(data: bytes) -> bool:
    return is_group_file(_json(data))


def _read_group(data: bytes, source: str) -> Group:
    return read_group(data, source=source)


def _write_group(value: Group, **_: Any) -> bytes:
    return group_to_json(value)


def _is_chat(data: bytes) -> bool:
    return _json(data) is _NOT_JSON and is_chat_jsonl(data)


def _read_chat(data: bytes, source: str) -> Chat:
    return read_chat_jsonl(data, source=source)


def _write_chat(value: Chat, **_: Any) -> bytes:
    return chat_to_jsonl(value).encode()


def _is_quick_reply_set(data: bytes) -> bool:
    value = _json(data)
    return isinstance(value, dict) and isinstance(value.get("qrList"), list) and "name" in value


def _read_quick_reply_set(data: bytes, source: str) -> QuickReplySet:
    try:
        return QuickReplySet.model_validate(json.loads(data))
    except ValueError as exc:
        raise FormatError(f"not a Quick Reply set: {exc}", source=source) from exc


def _write_quick_reply_set(value: QuickReplySet, **_: Any) -> bytes:
    """SillyTavern's export: one line of JSON, every key in its order."""
    return value.export_text().encode()


@dataclass(frozen=True, slots=True)
class BuiltinFormat:
    """One built-in format as the ``register_formats`` hook takes it."""

    name: str
    kind: str
    priority: int
    detect: Any
    read: Any
    write: Any = None


#: Detection order is by priority: containers first (a PNG or zip is never JSON), settings
#: before presets (settings.json embeds preset-like blocks), cards before lorebooks (a card
#: embeds a book), and the loosest detector (YAML) last.
BUILTIN_FORMATS: tuple[BuiltinFormat, ...] = (
    BuiltinFormat("card-png", "card", 100, _is_png_card, _read_card, _write_card_png),
    BuiltinFormat("card-charx", "card", 90, _is_charx, _read_card, _write_card_charx),
    BuiltinFormat("st-settings", "settings", 70, _is_settings, _read_settings),
    BuiltinFormat("group-json", "group", 65, _is_group, _read_group, _write_group),
    BuiltinFormat("card-json", "card", 60, _is_json_card, _read_card, _write_card_json),
    BuiltinFormat("chat-jsonl", "chat", 50, _is_chat, _read_chat, _write_chat),
    BuiltinFormat("lorebook-json", "lorebook", 40, _is_lorebook, _read_lorebook, _write_lorebook),
    BuiltinFormat("preset-json", "preset", 30, _is_preset, _read_preset, _write_preset),
    BuiltinFormat(
        "quick-reply-json",
        "quick_reply_set",
        25,
        _is_quick_reply_set,
        _read_quick_reply_set,
        _write_quick_reply_set,
    ),
    # YAML, like card-yaml, but with keys of its own (keywords + prompts): tried first
    BuiltinFormat(
        "chatluna-preset",
        "chatluna_preset",
        5,
        is_chatluna_preset,
        read_chatluna_preset,
        write_chatluna,
    ),
    BuiltinFormat("card-yaml", "card", 0, _is_yaml_card, _read_card),
)
