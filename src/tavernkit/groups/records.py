"""Groups in the store: owned ``group`` records, their members resolved to stored characters,
and the chats that belong to them.

A group record is the SillyTavern group file (:class:`Group`). Its ``members`` are character
avatar file names, as SillyTavern writes them; a stored character is that member when its
name is the file name without the extension (``Alice.png`` is the character ``Alice``), or else
when its card's ``avatar`` is that file name. ``chats`` and ``chat_id`` hold the names of the
group's chats in the store (a SillyTavern group chat is ``group chats/<name>.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.models.character import Card, Character
from tavernkit.models.group import Group, GroupMember, find_member, resolve_members
from tavernkit.store.protocol import Store

__all__ = [
    "GROUP_KIND",
    "LoadedGroup",
    "attach_chat",
    "avatar_name",
    "create_group",
    "edit_group",
    "group_of_chat",
    "load_group",
    "member_avatar",
]

GROUP_KIND = "group"


def avatar_name(character_name: str) -> str:
    """The avatar file name SillyTavern gives a character imported under this name."""
    return f"{character_name}.png"


@dataclass(frozen=True, slots=True)
class LoadedGroup:
    """A stored group with its members resolved: ``id`` is the record's id, ``members`` the
    members found in the store (list order, muted included), ``missing`` the avatars of
    members that match no stored character (SillyTavern drops those when a group opens)."""

    id: str
    group: Group
    members: list[GroupMember]
    missing: list[str]
    #: member avatar -> the stored character's id
    character_ids: dict[str, str] = field(default_factory=dict)

    def member(self, name: str) -> GroupMember:
        """The member ``name`` finds (:func:`~tavernkit.models.group.find_member`: an index,
        a name or avatar, a unique prefix); a :class:`~tavernkit.errors.NotFound` naming the
        members otherwise."""
        found = find_member(self.members, name)
        if found is not None:
            return found
        names = ", ".join(m.name for m in self.members) or "none"
        raise NotFound(f"group {self.group.name!r} has no member {name!r} (members: {names})")


async def _roster(store: Store, avatars: list[str], owner: str) -> dict[str, tuple[str, Character]]:
    """The stored characters (id, data) of ``avatars``: by name first (``Alice.png`` is the
    character ``Alice``, one lookup each), then, only for avatars still unknown, by the
    ``avatar`` a stored card carries (one pass over the characters)."""
    roster: dict[str, tuple[str, Character]] = {}
    for avatar in dict.fromkeys(avatars):
        stem = avatar.rsplit(".", 1)[0] if "." in avatar else avatar
        try:
            stored = await store.get_record("character", stem, owner=owner)
        except NotFound:
            continue
        roster[avatar] = (stored.info.id, Card.model_validate(stored.data).data)
    unknown = {a for a in avatars if a not in roster}
    if not unknown:
        return roster
    for info in await store.list("character", owner=owner):
        card = await store.get("character", info.id, owner=owner)
        if not isinstance(card, Card):
            continue
        own = (card.model_extra or {}).get("avatar")
        if isinstance(own, str) and own in unknown:
            roster.setdefault(own, (info.id, card.data))
    return roster


async def load_group(store: Store, ref: str, *, owner: str = DEFAULT_OWNER) -> LoadedGroup:
    """The group with id or name ``ref`` and its members."""
    stored = await store.get_record(GROUP_KIND, ref, owner=owner)
    group = Group.model_validate(stored.data)
    roster = await _roster(store, group.members, owner)
    members = resolve_members(group, {avatar: c for avatar, (_, c) in roster.items()})
    missing = [m for m in group.members if m not in roster]
    ids = {m.avatar: roster[m.avatar][0] for m in members}
    return LoadedGroup(stored.info.id, group, members, missing, ids)


async def group_of_chat(
    store: Store, chat_name: str, *, owner: str = DEFAULT_OWNER
) -> LoadedGroup | None:
    """The stored group that lists the chat ``chat_name``, or ``None`` (a solo chat)."""
    for info in await store.list(GROUP_KIND, owner=owner):
        stored = await store.get_record(GROUP_KIND, info.id, owner=owner)
        group = Group.model_validate(stored.data)
        if chat_name in group.chats or chat_name == group.chat_id:
            return await load_group(store, info.id, owner=owner)
    return None


async def attach_chat(
    store: Store, ref: str, chat_name: str, *, owner: str = DEFAULT_OWNER, current: bool = True
) -> Group:
    """List ``chat_name`` among the group's chats (``current``: and make it the open one)."""
    if not chat_name:
        raise FormatError("a group chat needs a name", field="chat_id")
    stored = await store.get_record(GROUP_KIND, ref, owner=owner)
    group = Group.model_validate(stored.data)
    if chat_name not in group.chats:
        group.chats = [*group.chats, chat_name]
    if current or not group.chat_id:
        group.chat_id = chat_name
    await store.put(GROUP_KIND, group, owner=owner, name=stored.info.name, id=stored.info.id)
    return group


async def member_avatar(store: Store, character: str, *, owner: str) -> str:
    """The avatar file name that makes the stored character ``character`` (id or name) a
    member: its card's ``avatar``, else ``<name>.png``."""
    stored = await store.get_record("character", character, owner=owner)
    card = Card.model_validate(stored.data)
    own = (card.model_extra or {}).get("avatar")
    if isinstance(own, str) and own and own != "none":
        return own
    return avatar_name(card.data.name or stored.info.name)


async def create_group(
    store: Store,
    name: str,
    characters: list[str],
    *,
    owner: str = DEFAULT_OWNER,
    created_ms: int,
    **fields: Any,
) -> LoadedGroup:
    """A new stored group of the stored ``characters`` (ids or names, in list order) with
    SillyTavern's defaults for a group it creates (``fields`` on top, e.g.
    ``activation_strategy``); its id is the creation time in ms, as SillyTavern's."""
    if not name.strip():
        raise FormatError("a group needs a name", field="name")
    try:
        await store.get_record(GROUP_KIND, name, owner=owner)
    except NotFound:
        pass
    else:
        raise Conflict(f"a group named {name!r} already exists")
    members = [await member_avatar(store, c, owner=owner) for c in characters]
    group = Group.create(id=str(created_ms), name=name, members=members, **fields)
    ref = await store.put(GROUP_KIND, group, owner=owner, name=name)
    return await load_group(store, ref.id, owner=owner)


async def edit_group(
    store: Store, ref: str, change: Callable[[LoadedGroup], None], *, owner: str = DEFAULT_OWNER
) -> LoadedGroup:
    """Apply ``change`` to the stored group ``ref`` (it edits ``loaded.group`` in place) and
    store it; a ``change`` that raises stores nothing. A ``change`` of the group's ``name``
    renames the record too."""
    loaded = await load_group(store, ref, owner=owner)
    stored = await store.get_record(GROUP_KIND, loaded.id, owner=owner)
    before = loaded.group.name
    change(loaded)
    renamed = loaded.group.name != before and bool(loaded.group.name)
    name = loaded.group.name if renamed else stored.info.name
    await store.put(GROUP_KIND, loaded.group, owner=owner, name=name, id=loaded.id)
    return await load_group(store, loaded.id, owner=owner)
