"""Finding a record of the library by name and exporting it (:class:`LibraryExports`, the base
of :class:`~tavernkit.library.Library`): the store kinds searched, in order, and the format each
``--format`` of each kind writes with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tavernkit.characters import Characters
from tavernkit.errors import FormatError, NotFound
from tavernkit.formats.chats import chat_to_jsonl
from tavernkit.formats.file_io import atomic_write_bytes
from tavernkit.formats.lorebooks import character_book_to_lorebook, lorebook_to_character_book
from tavernkit.models.character import Card
from tavernkit.models.chatluna import CHATLUNA_PRESET_KIND
from tavernkit.models.lorebook import Lorebook
from tavernkit.plugins.formats import FormatRegistry
from tavernkit.store.chat_types import ChatInfo
from tavernkit.store.record_types import RecordInfo

__all__ = [
    "EXPORT_FORMATS",
    "PRESET_STORE_KIND",
    "SEARCH_ORDER",
    "Found",
    "LibraryExports",
    "kind_label",
    "record_wire",
]

#: Where ``show NAME`` and ``export NAME`` look, in order, when no kind is given.
SEARCH_ORDER: tuple[str, ...] = (
    "character",
    "lorebook",
    "chat_preset",
    "instruct",
    "context",
    "sysprompt",
    "reasoning",
    "textgen_preset",
    "kobold_preset",
    "novel_preset",
    "chatluna_preset",
    "persona",
    "connection_profile",
    "group",
    "quick_reply_set",
)

#: preset kind (formats.presets) -> store kind
PRESET_STORE_KIND = {
    "openai": "chat_preset",
    "instruct": "instruct",
    "context": "context",
    "sysprompt": "sysprompt",
    "reasoning": "reasoning",
    "textgen": "textgen_preset",
    "kobold": "kobold_preset",
    "novel": "novel_preset",
}

#: (store kind, --format) -> registered format name
EXPORT_FORMATS: dict[tuple[str, str], str] = {
    ("character", "png"): "card-png",
    ("character", "json"): "card-json",
    ("character", "charx"): "card-charx",
    ("lorebook", "json"): "lorebook-json",
    ("chat", "jsonl"): "chat-jsonl",
    ("group", "json"): "group-json",
    ("quick_reply_set", "json"): "quick-reply-json",
    (CHATLUNA_PRESET_KIND, "yaml"): "chatluna-preset",
    **{(kind, "json"): "preset-json" for kind in PRESET_STORE_KIND.values()},
}


@dataclass(frozen=True, slots=True)
class Found:
    """A record found by name: a document record, or a chat."""

    kind: str
    id: str
    name: str
    record: RecordInfo | None = None
    chat: ChatInfo | None = None


class LibraryExports(Characters):
    """Find and export records of one owner; :class:`~tavernkit.library.Library` adds imports."""

    formats: FormatRegistry

    # -- find -----------------------------------------------------------------------------

    async def find(self, name: str, *, kind: str | None = None) -> Found:
        """The record called ``name`` (or with that id): characters first, then lorebooks,
        presets, templates, personas, profiles, and chats last. ``kind`` narrows the search."""
        kinds = (kind,) if kind and kind != "chat" else () if kind == "chat" else SEARCH_ORDER
        for candidate in kinds:
            try:
                stored = await self.store.get_record(candidate, name, owner=self.owner)
            except NotFound:
                continue
            info = stored.info
            return Found(candidate, info.id, info.name, record=info)
        if kind in (None, "chat"):
            try:
                chat = await self.store.get_chat_info(name, owner=self.owner)
            except NotFound:
                pass
            else:
                return Found("chat", chat.id, chat.name, chat=chat)
        where = (
            kind_label(kind) if kind else "character, lorebook, preset, template, persona or chat"
        )
        raise NotFound(f"no {where} named {name!r}")

    # -- export ---------------------------------------------------------------------------

    async def export_bytes(
        self, name: str, fmt: str, *, kind: str | None = None, spec: str = "v2"
    ) -> tuple[Found, bytes]:
        found = await self.find(name, kind=kind)
        format_name = EXPORT_FORMATS.get((found.kind, fmt))
        if format_name is None:
            choices = sorted(f for (k, f) in EXPORT_FORMATS if k == found.kind)
            raise FormatError(
                f"a {kind_label(found.kind)} cannot be exported as {fmt!r} "
                f"(choose {', '.join(choices) or 'nothing'})",
                field="format",
            )
        writer = self.formats.get(format_name).write
        assert writer is not None  # EXPORT_FORMATS names writable formats only
        if found.kind == "chat":
            stored = await self.store.load_chat(found.id, owner=self.owner)
            return found, chat_to_jsonl(stored.to_chat()).encode()
        value = await self.store.get(found.kind, found.id, owner=self.owner)
        options: dict[str, Any] = {"spec": spec}
        if found.kind == "character" and isinstance(value, Card):
            value = await self._with_linked_book(value, found.id)
            options["image"] = await self.store.get_blob(
                "character", found.id, "avatar", owner=self.owner
            )
            if fmt == "charx":
                options["assets"], options["extra_files"] = await self._charx_parts(found.id)
        return found, writer(value, **options)

    async def _with_linked_book(self, card: Card, card_id: str) -> Card:
        """``card`` with its embedded book as the linked lorebook now is: the book imported
        from the card's ``character_book`` (known by the ``originalData`` it keeps) is the same
        book, so editing it and exporting the card writes the edits. An unedited book, or a
        linked book that did not come from this card, leaves ``character_book`` as read."""
        embedded = card.data.character_book
        if embedded is None:
            return card
        linked = await self.store.links("character", card_id, "lorebook", owner=self.owner)
        own = embedded.name or f"{card.data.name}'s Lorebook"
        chosen = next((i for i in linked if i.name == own), linked[0] if linked else None)
        if chosen is None:
            return card
        book = await self.store.get("lorebook", chosen.id, owner=self.owner)
        if not isinstance(book, Lorebook):
            return card
        stored, as_read = (
            record_wire(book),
            record_wire(character_book_to_lorebook(embedded, character_name=card.data.name)),
        )
        if stored.get("originalData") != as_read.get("originalData"):
            return card  # another book (a world file of that name): not the card's own
        if stored.get("entries") == as_read.get("entries"):
            return card
        card = card.model_copy(deep=True)
        card.data.character_book = lorebook_to_character_book(book, name=embedded.name)
        return card

    async def export_file(
        self,
        name: str,
        fmt: str,
        path: Path | str,
        *,
        kind: str | None = None,
        spec: str = "v2",
    ) -> Found:
        """Write the export to ``path`` (atomically: a failed write leaves no part file). A
        ``path`` that is a folder, or in a folder that does not exist, is a
        :class:`~tavernkit.errors.FormatError` before anything is read or written."""
        path = Path(path)
        if path.is_dir():
            raise FormatError("is a folder; name the file to write", source=str(path))
        if not path.parent.is_dir():
            raise FormatError(
                f"the folder {path.parent} does not exist; create it first", source=str(path)
            )
        found, data = await self.export_bytes(name, fmt, kind=kind, spec=spec)
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            raise FormatError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
        return found


def record_wire(model: BaseModel) -> dict[str, Any]:
    to_wire = getattr(model, "to_wire", None)
    data = to_wire() if callable(to_wire) else model.model_dump(mode="json", by_alias=True)
    assert isinstance(data, dict)
    return data


def kind_label(kind: str) -> str:
    return {
        "chat_preset": "chat-completion preset",
        "textgen_preset": "text-generation preset",
        "kobold_preset": "KoboldAI preset",
        "novel_preset": "NovelAI preset",
        "sysprompt": "system prompt",
        "instruct": "instruct template",
        "context": "context template",
        "reasoning": "reasoning template",
        "connection_profile": "connection profile",
        CHATLUNA_PRESET_KIND: "ChatLuna preset",
        "quick_reply_set": "Quick Reply set",
    }.get(kind, kind)
