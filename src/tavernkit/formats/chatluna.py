"""ChatLuna character presets (``data/chathub/presets/*.yml``): detect, read, write, and the
lorebook their ``world_lores`` make.

A ChatLuna preset is YAML whose top level has ``keywords`` and ``prompts``
(:class:`~tavernkit.models.chatluna.ChatLunaPreset`). ``tavernkit import`` stores it as a
``chatluna_preset`` record and its ``world_lores`` entries as a lorebook of the same name
(:func:`lorebook_from_chatluna`), so tavernkit's world-info scan can use them: keywords become
keys (a ``/regex/`` keyword stays a regex key), ``constant``, ``order``, ``caseSensitive``,
``matchWholeWord``, ``scanDepth`` and ``enabled`` map to the entry fields of those meanings,
and ``insertPosition`` (or the defaults item's) to the nearest world-info position.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

import yaml
from pydantic import ValidationError

from tavernkit.errors import FormatError
from tavernkit.jscompat import js_trim
from tavernkit.models.chatluna import ChatLunaLore, ChatLunaPreset
from tavernkit.models.lorebook import Lorebook, LoreEntry, WorldInfoPosition

__all__ = ["is_chatluna_preset", "lorebook_from_chatluna", "read_chatluna_preset", "write_chatluna"]

#: ChatLuna's insert positions -> SillyTavern's world-info positions (scenario positions have
#: no slot of their own there: before/after the character definitions is the nearest)
_POSITIONS = {
    "before_char_defs": WorldInfoPosition.BEFORE,
    "after_char_defs": WorldInfoPosition.AFTER,
    "before_scenario": WorldInfoPosition.AFTER,
    "after_scenario": WorldInfoPosition.AFTER,
    "before_example_messages": WorldInfoPosition.EM_TOP,
    "after_example_messages": WorldInfoPosition.EM_BOTTOM,
}


def _load(data: bytes) -> Any:
    if data[:1] in (b"{", b"[") or b"\x00" in data[:1024]:
        return None
    try:
        return yaml.safe_load(data)
    except yaml.YAMLError:
        return None


def is_chatluna_preset(data: bytes) -> bool:
    value = _load(data)
    return isinstance(value, dict) and "keywords" in value and "prompts" in value


def read_chatluna_preset(data: bytes, source: str) -> ChatLunaPreset:
    """The preset; named after the file's stem (a label such as ``<bytes>``: the first
    keyword). Bad YAML or fields are a ``FormatError`` naming the field."""
    try:
        value = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise FormatError(f"not valid YAML: {exc}", source=source) from None
    if not isinstance(value, dict):
        raise FormatError("a ChatLuna preset is a YAML mapping", source=source)
    try:
        preset = ChatLunaPreset.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        raise FormatError(error["msg"], source=source, field=field or None) from None
    for prompt in preset.prompts:
        # ChatLuna's loadPreset trims each prompt string (a YAML block scalar's trailing newline,
        # a quoted string's spaces): what it renders is the trimmed text
        if isinstance(prompt.content, str):
            prompt.content = js_trim(prompt.content)
    if preset.name is None:
        stem = PurePath(source).stem if not source.startswith("<") else ""
        preset.name = stem or preset.keywords[0]
    return preset


def write_chatluna(value: ChatLunaPreset, **_: Any) -> bytes:
    data = value.model_dump(mode="json", exclude_none=True, exclude={"name"})
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode("utf-8")


def _entry(uid: int, lore: ChatLunaLore, defaults: ChatLunaLore | None) -> LoreEntry:
    position = lore.insertPosition or (defaults.insertPosition if defaults else None)
    scan_depth = lore.scanDepth if lore.scanDepth is not None else None
    fields: dict[str, Any] = {
        "uid": uid,
        "keys": lore.keyword_list(),
        "content": lore.content or "",
        "constant": bool(lore.constant),
        "disable": lore.enabled is False,
        "position": int(_POSITIONS.get(position or "", WorldInfoPosition.BEFORE)),
        "scan_depth": scan_depth,
        "case_sensitive": lore.caseSensitive,
        "match_whole_words": lore.matchWholeWord,
        "comment": lore.keyword_list()[0],
    }
    if lore.order is not None:
        fields["order"] = lore.order
    if lore.recursiveScan is False:
        fields["prevent_recursion"] = True
    return LoreEntry(**fields)


def lorebook_from_chatluna(preset: ChatLunaPreset) -> Lorebook | None:
    """The preset's ``world_lores`` as a lorebook named like the preset (``None`` without
    entries)."""
    entries = preset.lore_entries()
    if not entries:
        return None
    defaults = preset.lore_defaults()
    # ChatLuna's book-wide settings (scan depth, token limit...) have no per-book slot in
    # SillyTavern's format: kept for an export back to ChatLuna
    extensions = {"chatluna": defaults.model_dump(exclude_none=True)} if defaults else {}
    return Lorebook(
        entries={str(uid): _entry(uid, lore, defaults) for uid, lore in enumerate(entries)},
        name=preset.name,
        extensions=extensions,
    )
