"""A library's characters: rename, duplicate, delete, and the files a CHARX card brought.

:class:`Characters` is the character half of :class:`~tavernkit.library.Library` (which adds
import and export on top): a character's chats, avatar and linked lorebooks point at its id,
so a rename or a copy keeps them attached, and a CHARX card's assets are stored as blobs of its
record (``charx-asset:<uri>``, ``charx-file:<path>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.formats.cards import ImportedCard
from tavernkit.models.character import Card
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo, StoredRecord

__all__ = ["CardAsset", "Characters", "charx_blobs"]

#: blob names of a CHARX card's assets (by their ``data.assets`` URI) and other members
_ASSET = "charx-asset:"
_FILE = "charx-file:"
_CHARX_PREFIXES = (_ASSET, _FILE)
_ROLES: tuple[tuple[str, Literal["asset", "file"]], ...] = ((_ASSET, "asset"), (_FILE, "file"))


@dataclass(frozen=True, slots=True)
class CardAsset:
    """One file a CHARX card brought: ``role`` ``asset`` (``ref`` is its URI in
    ``data.assets``, e.g. ``embeded://assets/icon/images/main.png``) or ``file`` (another
    archive member, ``ref`` its path, e.g. ``module.risum``)."""

    role: Literal["asset", "file"]
    ref: str


def charx_blobs(imported: ImportedCard) -> dict[str, bytes]:
    """The blobs a CHARX card's assets and other archive members are stored as."""
    blobs = {_ASSET + uri: data for uri, data in imported.assets.items()}
    blobs.update((_FILE + path, data) for path, data in imported.extra_files.items())
    return blobs


class Characters:
    """The characters of one owner in ``store``."""

    store: Store
    owner: str

    async def _character(self, name: str) -> StoredRecord:
        try:
            return await self.store.get_record("character", name, owner=self.owner)
        except NotFound:
            raise NotFound(f"no character named {name!r}") from None

    async def rename_character(self, ref: str, new_name: str) -> RecordInfo:
        """Rename a character (the card's ``data.name`` and the record's name); its chats,
        avatar and linked lorebooks stay attached (they point at the id)."""
        new_name = new_name.strip()
        if not new_name:
            raise FormatError("a character needs a name", field="data.name")
        stored = await self.store.get_record("character", ref, owner=self.owner)
        await self._name_free(new_name, stored.info.id)
        card = Card.model_validate(stored.data)
        card.data.name = new_name
        await self.store.put("character", card, owner=self.owner, name=new_name, id=stored.info.id)
        await self.store.set_chats_character_name(stored.info.id, new_name, owner=self.owner)
        return (await self.store.get_record("character", stored.info.id, owner=self.owner)).info

    async def duplicate_character(self, ref: str, new_name: str | None = None) -> RecordInfo:
        """A copy of a character under ``new_name`` (default ``"<name> (copy)"``, numbered
        when taken), with its avatar and lorebook links; chats are not copied."""
        stored = await self.store.get_record("character", ref, owner=self.owner)
        base = (new_name or f"{stored.info.name} (copy)").strip()
        name, number = base, 2
        while new_name is None and await self._taken(name):
            name, number = f"{base} {number}", number + 1
        await self._name_free(name, None)
        card = Card.model_validate(stored.data)
        card.data.name = name
        avatar = await self.store.get_blob("character", stored.info.id, owner=self.owner)
        blobs = {"avatar": avatar} if avatar is not None else None
        ref_new = await self.store.put("character", card, owner=self.owner, name=name, blobs=blobs)
        for book in await self.store.links(
            "character", stored.info.id, "lorebook", owner=self.owner
        ):
            await self.store.link(
                "character", ref_new.id, "lorebook", "lorebook", book.id, owner=self.owner
            )
        return (await self.store.get_record("character", ref_new.id, owner=self.owner)).info

    async def delete_character(self, ref: str, *, with_chats: bool = False) -> int:
        """Delete a character; ``with_chats`` deletes its chats too (else they stay, attached
        to no character). Returns how many chats were deleted."""
        info = (await self.store.get_record("character", ref, owner=self.owner)).info
        chats = await self.store.list_chats(owner=self.owner, character=info.id)
        if with_chats:
            for chat in chats:
                await self.store.delete_chat(chat.id, owner=self.owner)
        await self.store.delete("character", info.id, owner=self.owner)
        return len(chats) if with_chats else 0

    async def _taken(self, name: str) -> bool:
        try:
            await self.store.get_record("character", name, owner=self.owner)
        except NotFound:
            return False
        return True

    async def _name_free(self, name: str, own_id: str | None) -> None:
        try:
            other = await self.store.get_record("character", name, owner=self.owner)
        except NotFound:
            return
        if other.info.id != own_id:
            raise Conflict(f"a character named {name!r} exists already")

    async def card(self, name: str) -> Card:
        value = await self.store.get("character", name, owner=self.owner)
        assert isinstance(value, Card)
        return value

    async def _drop_stale_charx_blobs(self, card_id: str, kept: set[str]) -> None:
        """A replaced card keeps no asset of the archive it replaced."""
        for blob in await self.store.list_blobs("character", card_id, owner=self.owner):
            if blob.startswith(_CHARX_PREFIXES) and blob not in kept:
                await self.store.set_blob("character", card_id, blob, None, owner=self.owner)

    async def card_assets(self, name: str) -> list[CardAsset]:
        """The assets a CHARX card brought (every ``data.assets`` file: icons, backgrounds,
        emotions, others) and its other archive members (``module.risum``...), in archive
        order; :meth:`card_asset` reads one. A PNG or JSON card has none."""
        found = await self._character(name)
        out: list[CardAsset] = []
        for blob in await self.store.list_blobs("character", found.info.id, owner=self.owner):
            for prefix, role in _ROLES:
                if blob.startswith(prefix):
                    out.append(CardAsset(role, blob.removeprefix(prefix)))
        return out

    async def card_asset(self, name: str, asset: CardAsset) -> bytes:
        """The bytes of one of :meth:`card_assets`; :class:`NotFound` names a missing one."""
        found = await self._character(name)
        prefix = _ASSET if asset.role == "asset" else _FILE
        data = await self.store.get_blob(
            "character", found.info.id, prefix + asset.ref, owner=self.owner
        )
        if data is None:
            raise NotFound(f"{found.info.name!r} has no {asset.role} {asset.ref!r}")
        return data

    async def _charx_parts(self, card_id: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        assets: dict[str, bytes] = {}
        files: dict[str, bytes] = {}
        for blob in await self.store.list_blobs("character", card_id, owner=self.owner):
            for prefix, into in ((_ASSET, assets), (_FILE, files)):
                if blob.startswith(prefix):
                    data = await self.store.get_blob("character", card_id, blob, owner=self.owner)
                    if data is not None:
                        into[blob.removeprefix(prefix)] = data
        return assets, files
