"""Lorebooks as a user manages them: create, rename, duplicate and delete a book, where it is
bound and binding it, and its entries one at a time (the web UI's lorebook screens and the
``/lorebooks/{ref}/...`` routes).

Where a book is bound is what a turn's world-info scan reads
(:func:`tavernkit.store.chat_state.load_chat_state`), and nothing else:

- ``global``: the settings' ``world_info.global_books`` (SillyTavern's global selection);
- ``character``: the store's ``character -> lorebook`` links (an imported card's embedded book,
  SillyTavern's "additional lorebooks"); a card's own ``extensions.world`` and the settings'
  ``char_lore`` extra books are read too, so they are listed (``via`` ``"card"`` and
  ``"extra"``) and unbinding a character clears them as well;
- ``chat``: the chat's ``chat_metadata.world_info`` (SillyTavern's chat lore, one book a chat);
- ``persona``: the persona's ``lorebook`` (SillyTavern's persona lore, one book a persona).

Every binding but the links names the book, so a rename rewrites them and a delete clears
them (a book made later under the old name is not bound by accident). Finding them reads the
settings, every character's links, every persona and every chat's header: one small read per
chat and character.

Entry edits read and write the one entry (the store's record-member calls: each entry is a
row of its own, so a 20,000-entry, 36 MB book is neither parsed nor rewritten for one entry),
under a lock per book in this process, so
edits sent together do not pick the same new uid. Only the entry written is validated. An
entry keeps its other keys and their order (SillyTavern keys an entry's timed-effect state by
its JSON in key order).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from tavernkit.chat.chat_metadata import chat_metadata
from tavernkit.chat.lorebooks import attach_character_lorebook, set_chat_lorebook
from tavernkit.errors import FormatError, NameTaken, NotFound
from tavernkit.models.character import Card
from tavernkit.models.lorebook import MAX_UID, LoreEntry, entry_template
from tavernkit.models.settings import Settings
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo, StoredRecord

__all__ = ["BINDING_SCOPES", "Binding", "BindingScope", "LorebookAdmin"]

KIND = "lorebook"

BindingScope = Literal["global", "character", "chat", "persona"]
BINDING_SCOPES: tuple[BindingScope, ...] = ("global", "character", "chat", "persona")

_T = TypeVar("_T")

#: (owner, book id) -> the lock its entry edits take (gone when no edit holds it)
_LOCKS: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


@dataclass(frozen=True, slots=True)
class Binding:
    """One place a book is used: ``id`` and ``name`` are the chat's, character's or persona's
    (empty for ``global``); ``character_id`` is a chat's character. ``via`` says how a
    character uses it: ``"link"`` (the store's link), ``"card"`` (the card's
    ``extensions.world``) or ``"extra"`` (the settings' ``char_lore``)."""

    scope: BindingScope
    id: str = ""
    name: str = ""
    via: str = ""
    character_name: str = ""


def _entry_error(exc: ValidationError) -> FormatError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return FormatError(err["msg"], source="<entry>", field=loc)


def _check_entry(entry: Mapping[str, Any]) -> None:
    """A 422 naming the entry's field (``depth``, ``key.0``...) when it would not load."""
    try:
        LoreEntry.model_validate(dict(entry), by_name=False)
    except ValidationError as exc:
        raise _entry_error(exc) from None


def _uid_value(uid: str) -> int | str:
    """An entry's ``uid`` as SillyTavern writes it: a number when the key is one."""
    return int(uid) if uid.isdigit() and len(uid) < 10 else uid


def _free_uid(taken: set[str]) -> int:
    """SillyTavern's ``getFreeWorldEntryUid``: the lowest unused integer uid."""
    for uid in range(MAX_UID):
        if str(uid) not in taken:
            return uid
    raise FormatError(f"no free uid below {MAX_UID}", field="entries")


class LorebookAdmin:
    """The lorebooks of one owner in ``store``."""

    def __init__(self, store: Store, owner: str) -> None:
        self.store = store
        self.owner = owner

    # -- books ------------------------------------------------------------------------------

    async def _book(self, ref: str) -> StoredRecord:
        return await self.store.get_record(KIND, ref, owner=self.owner)

    async def _name_free(self, name: str, own_id: str | None) -> None:
        try:
            other = await self._book(name)
        except NotFound:
            return
        if other.info.id != own_id:
            raise NameTaken(f"a lorebook named {name!r} exists already", kind=KIND, name=name)

    @staticmethod
    def _clean_name(name: str) -> str:
        name = name.strip()
        if not name:
            raise FormatError("a lorebook needs a name", field="name")
        return name

    async def create(self, name: str) -> RecordInfo:
        """An empty book called ``name`` (409 ``NameTaken`` when one is)."""
        name = self._clean_name(name)
        await self._name_free(name, None)
        ref = await self.store.put(KIND, {"entries": {}}, owner=self.owner, name=name)
        return (await self._book(ref.id)).info

    async def rename(self, ref: str, new_name: str) -> RecordInfo:
        """Rename the book; every binding that names it is rewritten to the new name."""
        new_name = self._clean_name(new_name)
        stored = await self._book(ref)
        old = stored.info.name
        if new_name == old:
            return stored.info
        await self._name_free(new_name, stored.info.id)
        data = dict(stored.data)
        if "name" in data:
            data["name"] = new_name
        await self.store.put(KIND, data, owner=self.owner, name=new_name, id=stored.info.id)
        await self._rewrite_bindings(old, new_name)
        return (await self._book(stored.info.id)).info

    async def duplicate(self, ref: str, new_name: str | None = None) -> RecordInfo:
        """A copy of the book (its entries, not its bindings) under ``new_name``, by default
        ``"<name> (copy)"`` (numbered when taken)."""
        stored = await self._book(ref)
        base = self._clean_name(new_name or f"{stored.info.name} (copy)")
        name, number = base, 2
        while new_name is None and await self._exists(name):
            name, number = f"{base} {number}", number + 1
        await self._name_free(name, None)
        data = dict(stored.data)
        if "name" in data:
            data["name"] = name
        made = await self.store.put(KIND, data, owner=self.owner, name=name)
        return (await self._book(made.id)).info

    async def _exists(self, name: str) -> bool:
        try:
            await self._book(name)
        except NotFound:
            return False
        return True

    async def delete(self, ref: str) -> None:
        """Delete the book and clear every binding that names it (its links go with it)."""
        info = (await self._book(ref)).info
        await self.store.delete(KIND, info.id, owner=self.owner)
        await self._rewrite_bindings(info.name, None)

    # -- bindings ---------------------------------------------------------------------------

    async def _settings(self) -> Settings:
        stored = await self.store.get_settings(owner=self.owner)
        return stored if isinstance(stored, Settings) else Settings()

    async def bindings(self) -> dict[str, list[Binding]]:
        """Where each book is bound, by book name (a name no book has is left out)."""
        books = {i.name for i in await self.store.list(KIND, owner=self.owner)}
        found: dict[str, list[Binding]] = {}

        def add(name: str | None, binding: Binding) -> None:
            if name and name in books:
                found.setdefault(name, []).append(binding)

        settings = await self._settings()
        for name in dict.fromkeys(settings.world_info.global_books):
            add(name, Binding("global"))
        characters = await self.store.list("character", owner=self.owner)
        by_name = {c.name: c for c in characters}
        cards = await self.store.get_shared_records(
            [("character", c.id) for c in characters], owner=self.owner
        )
        for character in characters:
            shared = cards.get(("character", character.id))
            world = shared.model.data.world if shared and isinstance(shared.model, Card) else None
            linked = await self.store.links("character", character.id, KIND, owner=self.owner)
            for book in linked:
                add(book.name, Binding("character", character.id, character.name, "link"))
            if world and all(b.name != world for b in linked):
                add(world, Binding("character", character.id, character.name, "card"))
        for lore in settings.world_info.char_lore:
            owner_card = by_name.get(lore.name)
            if owner_card is not None:
                for name in dict.fromkeys(lore.extra_books):
                    add(name, Binding("character", owner_card.id, owner_card.name, "extra"))
        for chat in await self.store.list_chats(owner=self.owner):
            _, metadata = await chat_metadata(self.store, chat.id, owner=self.owner)
            add(
                metadata.world_info,
                Binding("chat", chat.id, chat.name, character_name=chat.character_name or ""),
            )
        personas = await self.store.list("persona", owner=self.owner)
        for persona in personas:
            record = await self.store.get_record("persona", persona.id, owner=self.owner)
            add(record.data.get("lorebook"), Binding("persona", persona.id, persona.name))
        # several ways one character uses the book are one binding (the first found)
        out: dict[str, list[Binding]] = {}
        for name, items in found.items():
            unique: dict[tuple[str, str], Binding] = {}
            for b in items:
                unique.setdefault((b.scope, b.id), b)
            out[name] = list(unique.values())
        return out

    async def used_by(self, ref: str) -> tuple[RecordInfo, list[Binding]]:
        info = (await self._book(ref)).info
        return info, (await self.bindings()).get(info.name, [])

    async def bind(
        self, ref: str, scope: BindingScope, target: str | None = None
    ) -> tuple[RecordInfo, list[Binding]]:
        """Bind the book ``scope``-wide: everywhere (``global``), or to the chat, character or
        persona ``target`` (id, or name for a character or persona). A chat and a persona
        have one book each: binding this one replaces theirs."""
        info = (await self._book(ref)).info
        if scope == "global":
            settings = await self._settings()
            if info.name not in settings.world_info.global_books:
                settings.world_info.global_books = [*settings.world_info.global_books, info.name]
                await self.store.put_settings(settings, owner=self.owner)
        elif scope == "chat":
            await set_chat_lorebook(self.store, self._target(target), info.id, owner=self.owner)
        elif scope == "character":
            await attach_character_lorebook(
                self.store, await self._character_id(target), info.id, owner=self.owner
            )
        else:
            await self._set_persona_book(self._target(target), info.name)
        return await self.used_by(info.id)

    async def unbind(
        self, ref: str, scope: BindingScope, target: str | None = None
    ) -> tuple[RecordInfo, list[Binding]]:
        """Undo :meth:`bind` (a binding that is not there changes nothing). Unbinding a
        character removes its link, and the card's ``extensions.world`` and the settings'
        extra books when they name this book: the character stops using it."""
        info = (await self._book(ref)).info
        if scope == "global":
            settings = await self._settings()
            if info.name in settings.world_info.global_books:
                settings.world_info.global_books = [
                    n for n in settings.world_info.global_books if n != info.name
                ]
                await self.store.put_settings(settings, owner=self.owner)
        elif scope == "chat":
            chat_id, metadata = await chat_metadata(
                self.store, self._target(target), owner=self.owner
            )
            if metadata.world_info == info.name:
                await set_chat_lorebook(self.store, chat_id, None, owner=self.owner)
        elif scope == "character":
            await self._unbind_character(await self._character_id(target), info)
        else:
            persona = await self.store.get_record("persona", self._target(target), owner=self.owner)
            if persona.data.get("lorebook") == info.name:
                await self._set_persona_book(persona.info.id, None)
        return await self.used_by(info.id)

    @staticmethod
    def _target(target: str | None) -> str:
        if not target:
            raise FormatError("name the chat, character or persona to bind", field="target")
        return target

    async def _character_id(self, target: str | None) -> str:
        found = await self.store.get_record("character", self._target(target), owner=self.owner)
        return found.info.id

    async def _set_persona_book(self, persona: str, name: str | None) -> None:
        stored = await self.store.get_record("persona", persona, owner=self.owner)
        data = dict(stored.data)
        data["lorebook"] = name
        await self.store.put(
            "persona", data, owner=self.owner, name=stored.info.name, id=stored.info.id
        )

    async def _unbind_character(self, character_id: str, book: RecordInfo) -> None:
        linked = await self.store.links("character", character_id, KIND, owner=self.owner)
        if any(b.id == book.id for b in linked):
            await self.store.unlink(
                "character", character_id, KIND, KIND, book.id, owner=self.owner
            )
        card = await self.store.get_record("character", character_id, owner=self.owner)
        await self._rename_card_world(card, book.name, None)
        settings = await self._settings()
        changed = False
        for lore in settings.world_info.char_lore:
            if lore.name == card.info.name and book.name in lore.extra_books:
                lore.extra_books = [n for n in lore.extra_books if n != book.name]
                changed = True
        if changed:
            await self.store.put_settings(settings, owner=self.owner)

    async def _rename_card_world(self, card: StoredRecord, old: str, new: str | None) -> None:
        data = card.data.get("data")
        extensions = data.get("extensions") if isinstance(data, dict) else None
        if not isinstance(extensions, dict) or extensions.get("world") != old:
            return
        extensions["world"] = new or ""
        await self.store.put(
            "character", card.data, owner=self.owner, name=card.info.name, id=card.info.id
        )

    async def _rewrite_bindings(self, old: str, new: str | None) -> None:
        """Every binding that names the book ``old``: renamed to ``new``, or cleared."""
        settings = await self._settings()
        wi = settings.world_info
        changed = False
        if old in wi.global_books:
            wi.global_books = list(
                dict.fromkeys(n for n in (new if b == old else b for b in wi.global_books) if n)
            )
            changed = True
        for lore in wi.char_lore:
            if old in lore.extra_books:
                lore.extra_books = list(
                    dict.fromkeys(
                        n for n in (new if b == old else b for b in lore.extra_books) if n
                    )
                )
                changed = True
        if changed:
            await self.store.put_settings(settings, owner=self.owner)
        characters = await self.store.list("character", owner=self.owner)
        cards = await self.store.get_shared_records(
            [("character", c.id) for c in characters], owner=self.owner
        )
        for (_, card_id), shared in cards.items():
            if isinstance(shared.model, Card) and shared.model.data.world == old:
                card = await self.store.get_record("character", card_id, owner=self.owner)
                await self._rename_card_world(card, old, new)
        for chat in await self.store.list_chats(owner=self.owner):
            chat_id, metadata = await chat_metadata(self.store, chat.id, owner=self.owner)
            if metadata.world_info == old:
                metadata.world_info = new
                await self.store.update_chat_metadata(chat_id, metadata.to_wire(), owner=self.owner)
        for persona in await self.store.list("persona", owner=self.owner):
            record = await self.store.get_record("persona", persona.id, owner=self.owner)
            if record.data.get("lorebook") == old:
                await self._set_persona_book(persona.id, new)

    # -- entries ----------------------------------------------------------------------------

    async def _info(self, ref: str) -> RecordInfo:
        """The book's listing line, by id or else by name, without reading its entries."""
        books = await self.store.list(KIND, owner=self.owner)
        found = [b for b in books if b.id == ref] or [b for b in books if b.name == ref]
        if not found:
            raise NotFound(f"no lorebook {ref!r}")
        return found[0]

    async def _locked(self, ref: str, change: Callable[[RecordInfo], Awaitable[_T]]) -> _T:
        """Run ``change`` on the book under its lock: edits sent together do not pick the
        same new uid or lose one another's fields."""
        info = await self._info(ref)
        key = (self.owner, info.id)
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = asyncio.Lock()
        async with lock:
            return await change(info)

    async def _stored_entry(self, book: str, uid: str) -> dict[str, Any]:
        try:
            found = await self.store.get_record_member(
                KIND, book, ("entries", uid), owner=self.owner
            )
        except NotFound:
            raise NotFound(f"no entry {uid} in this lorebook") from None
        if not isinstance(found, dict):
            raise NotFound(f"no entry {uid} in this lorebook")
        return found

    async def _store_entry(self, book: str, uid: str, entry: dict[str, Any]) -> dict[str, Any]:
        _check_entry(entry)
        await self.store.put_record_member(KIND, book, ("entries", uid), entry, owner=self.owner)
        return entry

    async def entry(self, ref: str, uid: str) -> dict[str, Any]:
        return await self._stored_entry((await self._info(ref)).id, uid)

    async def add_entry(self, ref: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A new entry under the lowest free uid: SillyTavern's new entry (every template
        field) with ``fields`` set (a ``uid`` among them is ignored)."""

        async def add(info: RecordInfo) -> dict[str, Any]:
            taken = await self.store.record_member_keys(
                KIND, info.id, ("entries",), owner=self.owner
            )
            uid = _free_uid(set(taken))
            entry: dict[str, Any] = {"uid": uid, **entry_template()}
            entry.update((k, v) for k, v in fields.items() if k not in ("uid", "displayIndex"))
            entry.setdefault("characterFilter", {"isExclude": False, "names": [], "tags": []})
            entry["displayIndex"] = uid
            return await self._store_entry(info.id, str(uid), entry)

        return await self._locked(ref, add)

    async def replace_entry(self, ref: str, uid: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the entry ``uid`` whole (its uid stays the path's)."""

        async def replace(info: RecordInfo) -> dict[str, Any]:
            current = await self._stored_entry(info.id, uid)
            new = {"uid": current.get("uid", _uid_value(uid)), **entry}
            new["uid"] = current.get("uid", _uid_value(uid))
            return await self._store_entry(info.id, uid, new)

        return await self._locked(ref, replace)

    async def patch_entry(self, ref: str, uid: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Set ``fields`` of the entry ``uid``; its other keys stay as they are, in place."""

        async def patch(info: RecordInfo) -> dict[str, Any]:
            current = await self._stored_entry(info.id, uid)
            if "uid" in fields and str(fields["uid"]) != str(current.get("uid", uid)):
                raise FormatError("an entry's uid cannot change", field="uid")
            return await self._store_entry(info.id, uid, {**current, **fields})

        return await self._locked(ref, patch)

    async def delete_entry(self, ref: str, uid: str) -> None:
        async def delete(info: RecordInfo) -> None:
            try:
                await self.store.delete_record_member(
                    KIND, info.id, ("entries", uid), owner=self.owner
                )
            except NotFound:
                raise NotFound(f"no entry {uid} in this lorebook") from None

        await self._locked(ref, delete)
