"""The library: importing files into the store, finding records by name, exporting them.

This is where formats meet storage (so neither imports the other): a file is recognised by
content through the format registry (built-ins and plugins alike), read into a model, and
stored under its owner; an export reads the record back and hands it to the format's writer.

Duplicate names: importing a record whose name is taken by an identical record is a no-op
("unchanged", so importing the same file twice is safe); a different record with that name is a
:class:`~tavernkit.errors.Conflict` unless ``replace=True`` (the record keeps its id, so links
and chats stay attached). Two exceptions make the common SillyTavern export (a card plus its
world file) import in either order: a card's embedded book never overwrites a stored book of
that name (the card is linked to the stored one: "kept"), and a world file replaces a book that
was only ever the copy embedded in a card (it carries ``originalData``).

Chat files are imported by :class:`~tavernkit.library_chats.ChatImports`, which
:class:`Library` extends; every import reports
:class:`~tavernkit.library_results.ImportResult` values.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tavernkit.characters import CardAsset, charx_blobs
from tavernkit.chat_import import parsed_chat
from tavernkit.errors import (
    FormatError,
    LimitExceeded,
    NameTaken,
    NotFound,
)
from tavernkit.formats.bad_bytes import repair_utf8
from tavernkit.formats.cards import ImportedCard
from tavernkit.formats.chatluna import lorebook_from_chatluna
from tavernkit.formats.file_io import DEFAULT_LIMITS, FormatLimits, read_limited
from tavernkit.formats.groups import is_group_chat
from tavernkit.formats.lorebooks import character_book_to_lorebook
from tavernkit.formats.presets import kind_of
from tavernkit.formats.settings import ImportedSettings
from tavernkit.library_chats import (
    CHAT_BATCH,
    OFF_LOOP_BYTES,
    ChatImports,
    off_loop,
    starts_as_chat,
)
from tavernkit.library_export import (
    EXPORT_FORMATS,
    PRESET_STORE_KIND,
    SEARCH_ORDER,
    Found,
    kind_label,
    record_wire,
)
from tavernkit.library_results import ImportResult, Status
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.models.character import Card
from tavernkit.models.chat import Chat
from tavernkit.models.chatluna import CHATLUNA_PRESET_KIND, ChatLunaPreset
from tavernkit.models.group import Group
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.models.settings import Settings
from tavernkit.plugins.formats import FormatRegistry
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo, StoredRecord

__all__ = ["EXPORT_FORMATS", "SEARCH_ORDER", "CardAsset", "Found", "Library"]


class Library(ChatImports):
    """Import, find and export records of one owner (and manage its characters:
    :class:`~tavernkit.characters.Characters`)."""

    def __init__(
        self,
        store: Store,
        formats: FormatRegistry,
        *,
        owner: str = DEFAULT_OWNER,
        limits: FormatLimits | None = None,
    ) -> None:
        self.store = store
        self.formats = formats
        self.owner = owner
        self.limits = limits or DEFAULT_LIMITS
        #: what an imported card's avatar becomes before it is stored (run in a worker
        #: thread): the server's bounds it (``tavernkit.server.avatars.import_avatar``);
        #: ``None`` keeps it as the file had it
        self.avatar_policy: Callable[[bytes], bytes] | None = None
        #: called with the bytes an import of a card is about to store, before it stores
        #: any: the server's storage quota raises there; ``None``: no check
        self.admit_bytes: Callable[[int], Awaitable[None]] | None = None

    # -- import ---------------------------------------------------------------------------

    async def import_file(
        self,
        path: Path | str,
        *,
        character: str | None = None,
        group: str | None = None,
        replace: bool = False,
        source: str | None = None,
    ) -> list[ImportResult]:
        """Import the file at ``path`` (``source``, its name in messages: the path by default).
        A SillyTavern chat (``.jsonl``) is read a batch of messages at a time, parsed and
        converted in a worker thread and written a batch at a time: its import holds a batch,
        never the file; any other file is read whole (each kind has its cap)."""
        path = Path(path)
        source = str(path) if source is None else source
        if group is None and await asyncio.to_thread(starts_as_chat, path):
            streamed = await self._import_chat_file(path, source, character, replace)
            if streamed is not None:
                return [streamed]
        cap = max(self.limits.image_bytes, self.limits.archive_unpacked_bytes)
        cap = max(cap, self.limits.chat_file_bytes)
        data = await asyncio.to_thread(read_limited, path, cap)
        return await self.import_bytes(
            data, source=source, character=character, group=group, replace=replace
        )

    async def import_bytes(
        self,
        data: bytes,
        *,
        source: str = "<bytes>",
        character: str | None = None,
        group: str | None = None,
        replace: bool = False,
    ) -> list[ImportResult]:
        """Detect ``data`` by content, read it and store what it holds. JSON text with bytes
        that are not UTF-8 is read with them replaced by U+FFFD, as SillyTavern reads it; the
        results' ``note`` names the offsets (see :mod:`tavernkit.formats.bad_bytes`).

        ``group`` (a stored group's id or name) imports a chat as that group's chat; a chat
        whose messages carry speakers' ``original_avatar`` is a group chat anyway, attached to
        the stored group that lists its name."""
        big = len(data) >= OFF_LOOP_BYTES
        data, repaired = await off_loop(big, repair_utf8, data, source=source)
        results = await self._import_data(data, source, character, replace, group)
        if repaired is None:
            return results
        return [
            dataclasses.replace(r, note=f"{r.note}; {repaired}" if r.note else repaired)
            for r in results
        ]

    def _check_lorebook_size(self, data: bytes, source: str) -> None:
        """Refuse a lorebook over this library's cap (``limits.lorebook_json_bytes``: a
        setting, e.g. the server's ``--lorebook-max-bytes``) before it is read; the reader's
        own cap, the default one, is the ceiling."""
        limit = self.limits.lorebook_json_bytes
        if len(data) <= limit:
            return
        handler = self.formats.detect(data)
        if handler is not None and handler.kind == "lorebook":
            raise LimitExceeded(
                f"lorebook is {len(data)} bytes, over the limit of {limit}", source=source
            )

    async def _import_data(
        self,
        data: bytes,
        source: str,
        character: str | None,
        replace: bool,
        group: str | None = None,
    ) -> list[ImportResult]:
        self._check_lorebook_size(data, source)
        big = len(data) >= OFF_LOOP_BYTES
        handler, value = await off_loop(big, self.formats.read, data, source)
        stem = Path(source).stem if not source.startswith("<") else None
        if isinstance(value, ImportedCard):
            return await self._import_card(value, source, replace)
        if isinstance(value, Lorebook):
            # A name the file's content does not hold is the file's (see formats.lorebooks).
            named_in_file = "name" in value.model_fields_set
            same = None if named_in_file else await self._same_lorebook(value)
            if same is not None:
                return [ImportResult("lorebook", same.name, same.id, "unchanged", source)]
            name = value.name or stem or "Lorebook"
            return [await self._put("lorebook", value, name, source, replace)]
        if isinstance(value, Group):
            return [await self._put("group", value, value.name or stem or "Group", source, replace)]
        if isinstance(value, Chat) and character is None and (group or is_group_chat(value)):
            return [await self._import_group_chat(value, stem or "group chat", source, group)]
        if isinstance(value, Chat):
            chat = parsed_chat(value, CHAT_BATCH)
            return [await self._import_chat(chat, stem or "chat", source, character, replace)]
        if isinstance(value, ImportedSettings):
            return await self._import_settings(value, source, replace)
        if isinstance(value, ChatLunaPreset):
            return await self._import_chatluna(value, source, replace)
        if isinstance(value, QuickReplySet):
            name = value.name or stem or "Quick Replies"
            return [await self._put("quick_reply_set", value, name, source, replace)]
        if handler.kind == "preset" and isinstance(value, BaseModel):
            kind = PRESET_STORE_KIND[kind_of(value)]  # type: ignore[arg-type]
            name = getattr(value, "name", None) or stem or kind
            return [await self._put(kind, value, str(name), source, replace)]
        raise FormatError(
            f"format {handler.name!r} read a value tavernkit cannot store ({type(value).__name__})",
            source=source,
        )

    async def _import_chatluna(
        self, preset: ChatLunaPreset, source: str, replace: bool
    ) -> list[ImportResult]:
        """The preset, and its ``world_lores`` as a lorebook of the same name; both are
        checked for conflicts before either is written."""
        name = preset.name or preset.keywords[0]
        book = lorebook_from_chatluna(preset)
        await self._decide(CHATLUNA_PRESET_KIND, preset, name, source, replace)
        if book is not None:
            await self._decide("lorebook", book, name, source, replace)
        results = [await self._put(CHATLUNA_PRESET_KIND, preset, name, source, replace)]
        if book is not None:
            results.append(await self._put("lorebook", book, name, source, replace))
        return results

    async def _same_lorebook(self, book: Lorebook) -> RecordInfo | None:
        """The stored book with exactly these entries: a world file names no book (SillyTavern
        names it after the file), so this is how a re-imported export is known as the same."""
        entries = record_wire(book).get("entries")
        for info in await self.store.list("lorebook", owner=self.owner):
            stored = await self.store.get_record("lorebook", info.id, owner=self.owner)
            if stored.data.get("entries") == entries:
                return info
        return None

    async def _decide(
        self,
        kind: str,
        record: BaseModel,
        name: str,
        source: str,
        replace: bool,
        *,
        keep_existing: bool = False,
    ) -> tuple[StoredRecord | None, Status]:
        """What importing ``record`` as ``name`` would do, and the record it would touch;
        :class:`Conflict` when it must not. Reads only, so a multi-record import can ask for
        every record before it writes any."""
        data = record_wire(record)
        try:
            existing = await self.store.get_record(kind, name, owner=self.owner)
        except NotFound:
            return None, "imported"
        if existing.data == data or _same_content(kind, existing.data, record):
            return existing, "unchanged"
        if keep_existing and not replace:
            return existing, "kept"
        embedded_copy = "originalData" in existing.data and "originalData" not in data
        if not (replace or (kind == "lorebook" and embedded_copy)):
            raise NameTaken(
                f"{_a(kind_label(kind))} named {name!r} already exists and differs from {source}",
                kind=kind,
                name=name,
            )
        return existing, "replaced"

    async def _put(
        self,
        kind: str,
        record: BaseModel,
        name: str,
        source: str,
        replace: bool,
        *,
        blobs: dict[str, bytes] | None = None,
        note: str = "",
        keep_existing: bool = False,
    ) -> ImportResult:
        existing, status = await self._decide(
            kind, record, name, source, replace, keep_existing=keep_existing
        )
        if existing is None:
            ref = await self.store.put(kind, record, owner=self.owner, name=name, blobs=blobs)
            return ImportResult(kind, name, ref.id, status, source, note)
        if status == "unchanged" and blobs:
            for blob, content in blobs.items():
                await self.store.set_blob(kind, existing.info.id, blob, content, owner=self.owner)
        if status in ("unchanged", "kept"):
            return ImportResult(kind, name, existing.info.id, status, source, note)
        ref = await self.store.put(
            kind, record, owner=self.owner, name=name, id=existing.info.id, blobs=blobs
        )
        return ImportResult(kind, name, ref.id, status, source, note)

    async def _import_card(
        self, imported: ImportedCard, source: str, replace: bool
    ) -> list[ImportResult]:
        character = imported.character
        kept = charx_blobs(imported)
        blobs: dict[str, bytes] = {}
        if imported.avatar is not None:
            avatar = imported.avatar
            if self.avatar_policy is not None:
                avatar = await asyncio.to_thread(self.avatar_policy, avatar)
            if avatar is not imported.avatar:
                # a CHARX's main icon is also one of its assets: not kept as it came either
                kept = {k: avatar if v is imported.avatar else v for k, v in kept.items()}
            blobs["avatar"] = avatar
        blobs.update(kept)
        if self.admit_bytes is not None:
            await self.admit_bytes(
                sum(len(b) for b in blobs.values())
                + len(imported.card.model_dump_json(by_alias=True))
            )
        results = [
            await self._put(
                "character",
                imported.card,
                character.name,
                source,
                replace,
                blobs=blobs or None,
                note=f"read as {imported.spec_found}",
            )
        ]
        if results[0].status != "kept":
            await self._drop_stale_charx_blobs(results[0].id, set(kept))
        results += await self._adopt_chats(character.name, results[0].id, source)
        if character.character_book is not None:
            # SillyTavern imports the embedded book as a world-info book of its own and links it
            # to the character; we do the same at once instead of asking.
            book = character_book_to_lorebook(
                character.character_book, character_name=character.name
            )
            name = book.name or f"{character.name}'s Lorebook"
            result = await self._put(
                "lorebook",
                book,
                name,
                source,
                replace,
                note=f"embedded in {character.name}",
                keep_existing=True,
            )
            results.append(result)
            linked = await self.store.links(
                "character", results[0].id, "lorebook", owner=self.owner
            )
            if all(info.id != result.id for info in linked):
                await self.store.link(
                    "character", results[0].id, "lorebook", "lorebook", result.id, owner=self.owner
                )
        return results

    async def _import_settings(
        self, imported: ImportedSettings, source: str, replace: bool
    ) -> list[ImportResult]:
        """The settings, their templates and personas. Every template is checked before the
        first write, so a conflict leaves the stored settings as they were. A persona whose
        avatar key is stored already is that persona (updated), not a new one."""
        candidates: Sequence[tuple[str, BaseModel | None]] = (
            ("instruct", imported.instruct),
            ("context", imported.context),
            ("sysprompt", imported.sysprompt),
            ("reasoning", imported.reasoning),
        )
        templates = [
            (kind, template, str(name))
            for kind, template in candidates
            if template is not None and (name := getattr(template, "name", None))
        ]
        for kind, template, name in templates:
            await self._decide(kind, template, name, source, replace)
        settings = imported.settings
        before = await self.store.get_settings(owner=self.owner)
        if isinstance(before, Settings):  # the allow lists name our records: they stay
            settings = settings.model_copy(deep=True)
            settings.regex.allowed_characters = list(before.regex.allowed_characters)
            settings.regex.allowed_presets = list(before.regex.allowed_presets)
        await self.store.put_settings(settings, owner=self.owner)
        results = [ImportResult("settings", "settings", self.owner, "replaced", source)]
        for kind, template, name in templates:
            results.append(await self._put(kind, template, name, source, replace))
        by_avatar: dict[str, StoredRecord] = {}
        for info in await self.store.list("persona", owner=self.owner):
            stored = await self.store.get_record("persona", info.id, owner=self.owner)
            avatar = stored.data.get("avatar")
            if isinstance(avatar, str) and avatar:
                by_avatar[avatar] = stored
        for persona in imported.personas:
            known = by_avatar.get(persona.avatar) if persona.avatar else None
            if known is None:
                ref = await self.store.put("persona", persona, owner=self.owner, name=persona.name)
                results.append(ImportResult("persona", persona.name, ref.id, "imported", source))
            elif known.data == record_wire(persona):
                results.append(
                    ImportResult("persona", persona.name, known.info.id, "unchanged", source)
                )
            else:
                await self.store.put(
                    "persona", persona, owner=self.owner, name=persona.name, id=known.info.id
                )
                results.append(
                    ImportResult("persona", persona.name, known.info.id, "replaced", source)
                )
        return results


def _same_content(kind: str, stored: dict[str, Any], record: BaseModel) -> bool:
    """Whether a card holds what the stored one does, whatever wrapper our exports put
    around it: a V3 spec or V2, the V1 fields SillyTavern writes beside ``data``, defaults
    written out or left off. So re-importing our own CHARX, PNG or JSON export is a no-op."""
    if kind != "character" or not isinstance(record, Card):
        return False
    try:
        known = Card.model_validate(stored)
    except ValueError:
        return False
    return known.data.model_dump(mode="json") == record.data.model_dump(mode="json")


def _a(label: str) -> str:
    return f"{'an' if label[:1] in 'aeiou' else 'a'} {label}"
