"""Groups and their chats over HTTP: make, list, read, edit (name, members, mutes, strategy)
and delete groups, open a group chat, list a group's chats, find a chat's group, and start a
group turn (an auto-mode tick too).

A group is the caller's own ``group`` record (:mod:`tavernkit.groups.records`). Members are
named by the stored characters they are (id or name) when added, and by their member name
(or avatar, or list index) when muted. A group turn runs on the server's turn machinery, as a
solo turn does (:class:`~tavernkit.server.turns.TurnHub`): ``POST /chats/{id}/group-turns``
answers 202 with the turn id, its events stream at the same
``/chats/{id}/turns/{turn}/events`` (each member's reply opens with a ``notice`` of
``kind: "member"``; the ``done`` event lists every member's reply under ``replies``),
``DELETE`` there stops it, and a busy chat is 409.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.chat.group_turn import group_for_chat
from tavernkit.errors import Conflict, GenerateTaskError, NotFound
from tavernkit.groups.records import (
    GROUP_KIND,
    LoadedGroup,
    create_group,
    edit_group,
    load_group,
    member_avatar,
)
from tavernkit.models.group import ActivationStrategy, GenerationMode
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.routes._common import Page, PageQuery, State, page_of
from tavernkit.server.routes.chats import ChatLine
from tavernkit.server.routes.turns import (
    TurnOverridesBody,
    TurnStartedBody,
    admit_turn,
    begin_turn,
)
from tavernkit.server.turn_request import TurnRequest

__all__ = ["router"]

router = APIRouter(tags=["groups"])

Strategy = Literal["natural", "list", "manual", "pooled"]
Mode = Literal["swap", "join", "join-muted"]

_MODES: dict[Mode, GenerationMode] = {
    "swap": GenerationMode.SWAP,
    "join": GenerationMode.APPEND,
    "join-muted": GenerationMode.APPEND_DISABLED,
}
_MODE_NAMES: dict[GenerationMode, Mode] = {mode: name for name, mode in _MODES.items()}


class MemberBody(BaseModel):
    name: str
    avatar: str
    muted: bool
    character_id: str
    #: the character's thumbnail; ``None`` when it has no picture (a JSON card), so a browser
    #: asks for no missing image
    thumbnail_url: str | None = None


class GroupBody(BaseModel):
    id: str
    name: str
    #: the members found in the store, in reply order (muted ones included)
    members: list[MemberBody]
    #: member avatars that match no stored character
    missing: list[str]
    #: ``None`` for a strategy SillyTavern does not know (nobody is drafted)
    strategy: Strategy | None
    mode: Mode
    allow_self_responses: bool
    auto_mode_delay: float
    join_prefix: str
    join_suffix: str
    #: the group's chats (their names), and the one open
    chats: list[str]
    chat: str

    @classmethod
    def of(cls, loaded: LoadedGroup) -> GroupBody:
        group = loaded.group
        strategy = group.strategy
        return cls(
            id=loaded.id,
            name=group.name,
            members=[
                MemberBody(
                    name=m.name,
                    avatar=m.avatar,
                    muted=m.muted,
                    character_id=loaded.character_ids[m.avatar],
                )
                for m in loaded.members
            ],
            missing=loaded.missing,
            strategy=None if strategy is None else _strategy_name(strategy),
            mode=_MODE_NAMES[group.mode],
            allow_self_responses=group.allow_self_responses,
            auto_mode_delay=float(group.auto_mode_delay),
            join_prefix=group.generation_mode_join_prefix,
            join_suffix=group.generation_mode_join_suffix,
            chats=list(group.chats),
            chat=group.chat_id,
        )


def _strategy_name(strategy: ActivationStrategy) -> Strategy:
    return strategy.name.lower()  # type: ignore[return-value]


class GroupSettingsBody(BaseModel):
    """How a group replies; a field left out keeps its value."""

    model_config = ConfigDict(extra="forbid")

    strategy: Strategy | None = None
    mode: Mode | None = None
    allow_self_responses: bool | None = None
    auto_mode_delay: float | None = Field(None, ge=1, le=86_400)
    join_prefix: str | None = Field(None, max_length=10_000)
    join_suffix: str | None = Field(None, max_length=10_000)

    def fields(self) -> dict[str, Any]:
        """The given settings as :class:`~tavernkit.models.group.Group` fields."""
        values = {
            "activation_strategy": None
            if self.strategy is None
            else int(ActivationStrategy[self.strategy.upper()]),
            "generation_mode": None if self.mode is None else int(_MODES[self.mode]),
            "allow_self_responses": self.allow_self_responses,
            "auto_mode_delay": self.auto_mode_delay,
            "generation_mode_join_prefix": self.join_prefix,
            "generation_mode_join_suffix": self.join_suffix,
        }
        return {k: v for k, v in values.items() if v is not None}


class NewGroup(GroupSettingsBody):
    name: str = Field(min_length=1, max_length=500)
    #: stored characters (ids or names), in reply order
    members: list[str] = Field(max_length=200)
    #: the members muted from the start (stored characters among ``members``, ids or names)
    muted: list[str] = Field(default_factory=list, max_length=200)


class GroupPatch(GroupSettingsBody):
    """An edit: ``name`` renames the group (409 when another group has it); ``members``
    replaces the member list (stored characters, ids or names, in reply order); ``muted``
    replaces who is muted (members, by name; with ``members``, stored characters among the
    new members, ids or names)."""

    name: str | None = Field(None, min_length=1, max_length=500)
    members: list[str] | None = Field(None, max_length=200)
    muted: list[str] | None = Field(None, max_length=200)


class NewGroupChat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=500)


class GroupTurnBody(BaseModel):
    """A group turn: ``send`` (``text`` may be empty: the members go on), ``trigger``
    (``member`` replies now, muted or not), ``regenerate`` (the last batch of replies again),
    ``swipe`` / ``continue`` (the last speaker), ``impersonate``. ``member`` on a ``send``
    makes that member the one who replies."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["send", "trigger", "swipe", "regenerate", "continue", "impersonate"] = "send"
    text: str = Field("", max_length=200_000)
    member: str | None = Field(None, min_length=1, max_length=500)
    overrides: TurnOverridesBody | None = None
    interrupt: bool = False
    #: an auto-mode tick (a ``send`` with no text and no member): the members go on among
    #: themselves, the manual strategy drafting one at random
    auto: bool = False
    #: a ``send`` or ``regenerate`` in place of message ``at``, on a new branch of the chat
    #: (``GET /chats/{id}/tree`` lists both); a regenerate has the member who wrote reply
    #: ``at`` speak again
    at: int | None = Field(None, ge=1, le=10_000_000)


@router.get("/groups")
async def list_groups(tk: UserTavern, paging: PageQuery) -> Page[GroupBody]:
    infos, total = page_of(await tk.store.list(GROUP_KIND, owner=tk.owner), paging)
    loaded = [await load_group(tk.store, i.id, owner=tk.owner) for i in infos]
    items = await _bodies(tk, loaded)
    return Page(items=items, total=total, offset=paging.offset, limit=paging.limit)


@router.post("/groups", status_code=201)
async def create_group_route(body: NewGroup, tk: UserTavern) -> GroupBody:
    """A group of stored characters (409 when the name is taken; 404 naming a character that
    is not the caller's)."""
    fields = body.fields()
    if body.muted:
        avatars = [await member_avatar(tk.store, c, owner=tk.owner) for c in body.members]
        fields["disabled_members"] = await _muted_avatars(tk, body.muted, avatars)
    loaded = await create_group(
        tk.store,
        body.name,
        body.members,
        owner=tk.owner,
        created_ms=int(time.time() * 1000),
        **fields,
    )
    return await _body(tk, loaded)


async def _body(tk: UserTavern, loaded: LoadedGroup) -> GroupBody:
    """The group's body, each member with its thumbnail's URL where it has a picture."""
    return (await _bodies(tk, [loaded]))[0]


async def _bodies(tk: UserTavern, groups: list[LoadedGroup]) -> list[GroupBody]:
    """The groups' bodies, each member with its thumbnail's URL where it has a picture: one
    store query for every member of every group, not one per member."""
    bodies = [GroupBody.of(loaded) for loaded in groups]
    members = [member for body in bodies for member in body.members]
    ids = [member.character_id for member in members]
    pictured = await tk.store.records_with_blob("character", ids, "avatar", owner=tk.owner)
    for member in members:
        if member.character_id in pictured:
            member.thumbnail_url = f"/characters/{member.character_id}/thumbnail"
    return bodies


async def _muted_avatars(tk: UserTavern, muted: list[str], avatars: list[str]) -> list[str]:
    """The avatars of the stored characters ``muted`` names (ids or names), each among
    ``avatars`` (a :class:`~tavernkit.errors.NotFound` otherwise)."""
    out: list[str] = []
    for ref in muted:
        avatar = await member_avatar(tk.store, ref, owner=tk.owner)
        if avatar not in avatars:
            raise NotFound(f"{ref!r} is not among the group's members")
        out.append(avatar)
    return list(dict.fromkeys(out))


@router.get("/groups/{ref}")
async def get_group(ref: str, tk: UserTavern) -> GroupBody:
    return await _body(tk, await load_group(tk.store, ref, owner=tk.owner))


@router.patch("/groups/{ref}")
async def edit_group_route(ref: str, body: GroupPatch, tk: UserTavern) -> GroupBody:
    """Edit the group; nothing is stored when any part names something that is not there."""
    current = await load_group(tk.store, ref, owner=tk.owner)  # the caller's, before anything
    if body.name is not None and body.name != current.group.name:
        try:
            other = await tk.store.get_record(GROUP_KIND, body.name, owner=tk.owner)
        except NotFound:
            pass
        else:
            if other.info.id != current.id:
                raise Conflict(f"a group named {body.name!r} already exists")
    avatars = (
        None
        if body.members is None
        else [await member_avatar(tk.store, c, owner=tk.owner) for c in body.members]
    )
    if avatars is not None and len(set(avatars)) != len(avatars):
        raise Conflict("a character is named twice in members")
    new_muted = (
        await _muted_avatars(tk, body.muted, avatars)
        if avatars is not None and body.muted is not None
        else None
    )

    def change(loaded: LoadedGroup) -> None:
        group = loaded.group
        if body.name is not None:
            group.name = body.name
        if new_muted is not None:
            group.disabled_members = new_muted
        elif body.muted is not None:
            muted = [loaded.member(m).avatar for m in body.muted]
            group.disabled_members = list(dict.fromkeys(muted))
        if avatars is not None:
            group.members = avatars
            group.disabled_members = [m for m in group.disabled_members if m in avatars]
        for key, value in body.fields().items():
            setattr(group, key, value)

    return await _body(tk, await edit_group(tk.store, ref, change, owner=tk.owner))


@router.delete("/groups/{ref}", status_code=204)
async def delete_group(ref: str, tk: UserTavern) -> None:
    """Delete the group (its chats stay, as chats with no character)."""
    loaded = await load_group(tk.store, ref, owner=tk.owner)
    await tk.store.delete(GROUP_KIND, loaded.id, owner=tk.owner)


@router.get("/groups/{ref}/chats")
async def list_group_chats(ref: str, tk: UserTavern, paging: PageQuery) -> Page[ChatLine]:
    """The group's chats, most recently updated first (a listed chat that is gone is left
    out)."""
    loaded = await load_group(tk.store, ref, owner=tk.owner)
    names = {*loaded.group.chats, loaded.group.chat_id}
    chats = await tk.store.list_chats(owner=tk.owner)  # newest first
    infos = [i for i in chats if i.character_id is None and i.name in names]
    items, total = page_of(infos, paging)
    return Page(
        items=[ChatLine.of(i) for i in items],
        total=total,
        offset=paging.offset,
        limit=paging.limit,
    )


@router.get("/chats/{chat_id}/group")
async def get_chat_group(chat_id: str, tk: UserTavern) -> GroupBody:
    """The group the chat belongs to (404 for a solo chat)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    return await _body(tk, await group_for_chat(tk.store, info.name, owner=tk.owner))


@router.post("/groups/{ref}/chats", status_code=201)
async def new_group_chat(ref: str, body: NewGroupChat, tk: UserTavern) -> ChatLine:
    """A new chat of the group, made its open chat, with every member's greeting."""
    return ChatLine.of(await tk.chats.new_group_chat(ref, name=body.name))


@router.post("/chats/{chat_id}/group-turns", status_code=202, response_model=TurnStartedBody)
async def start_group_turn(
    chat_id: str, body: GroupTurnBody, principal: CurrentPrincipal, tk: UserTavern, state: State
) -> Any:
    """Start a turn of a group chat (404 for a solo chat or an unknown member; 409 when the
    chat is generating, unless ``interrupt``; 400 for an ``auto`` tick that is not a bare
    ``send``)."""
    await admit_turn(state, principal, tk, chat_id, interrupt=body.interrupt)
    if body.auto and (body.kind != "send" or body.text or body.member is not None):
        raise GenerateTaskError(
            "invalid_input",
            "an auto-mode tick is a send with no text and no member",
            details={"field": "auto"},
        )
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    loaded = await group_for_chat(tk.store, info.name, owner=tk.owner)
    if body.member is not None:
        loaded.member(body.member)
    request = TurnRequest(
        kind=body.kind,
        text=body.text,
        overrides=body.overrides.model_dump(exclude_none=True) if body.overrides else None,
        interrupt=body.interrupt,
        group=True,
        member=body.member,
        auto=body.auto,
        at=body.at,
    )
    return await begin_turn(state, tk, info.id, request)
