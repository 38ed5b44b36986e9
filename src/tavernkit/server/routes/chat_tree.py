"""A chat's tree: its branches (``GET /chats/{id}/tree``), a new branch at a message (``POST``
there), the current path (``PUT /chats/{id}/path``) and the whole tree as one JSON document
(``GET /chats/{id}/tree/export``). A regenerate or a resend in the middle of a chat branches
through the turn route (``POST /chats/{id}/turns`` with ``at``). The current path is what
every other chat route reads and what ``GET /export/chat/{id}?format=jsonl`` writes."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.chat.tree_export import tree_document
from tavernkit.errors import ChatBusy
from tavernkit.server.auth import UserTavern
from tavernkit.server.state import ServerState, server_state
from tavernkit.store.chat_tree import BranchRow, chain, owner_at
from tavernkit.store.chat_types import ChatBranch, ChatTree

__all__ = ["router"]

router = APIRouter(prefix="/chats", tags=["chats"])

State = Annotated[ServerState, Depends(server_state)]

#: how much of a branch's first message a preview shows
PREVIEW_CHARS = 160


class BranchPreview(BaseModel):
    name: str
    is_user: bool
    text: str


class BranchNode(BaseModel):
    id: str
    #: the branch whose path it continues (``None``: the root, ``main``)
    parent: str | None
    #: the index of its first own message
    fork: int
    #: how many messages are its own
    length: int
    #: whether the current path goes through it; ``current``: it is the path's last branch
    on_path: bool
    current: bool
    #: its first own message, shortened; ``None`` when it has none yet
    preview: BranchPreview | None

    @classmethod
    def of(cls, branch: ChatBranch, current: str) -> BranchNode:
        return cls(
            id=branch.id,
            parent=branch.parent,
            fork=branch.fork,
            length=branch.length,
            on_path=branch.on_path,
            current=branch.id == current,
            preview=_preview(branch.first),
        )


class Alternative(BaseModel):
    #: the branch to switch to for this alternative (``PUT /chats/{id}/path``)
    branch: str
    #: the alternative's message at the branch point
    preview: BranchPreview | None
    #: whether the current path shows this alternative there
    on_path: bool


class BranchPoint(BaseModel):
    #: the index of the message the alternatives replace one another at
    index: int
    alternatives: list[Alternative]


class TreeBody(BaseModel):
    chat_id: str
    #: the branch whose path is the chat's current one
    current: str
    #: how many messages the current path holds
    message_count: int
    #: root first, each branch before the branches that continue it
    branches: list[BranchNode]
    #: where the chat branches, in message order: the continuations at each point
    points: list[BranchPoint]

    @classmethod
    def of(cls, tree: ChatTree) -> TreeBody:
        return cls(
            chat_id=tree.info.id,
            current=tree.current,
            message_count=tree.info.message_count,
            branches=[BranchNode.of(b, tree.current) for b in tree.branches],
            points=_points(tree),
        )


class ForkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the message the new branch starts at (it and the later ones stay in the old branch)
    index: int = Field(ge=1, le=10_000_000)


class PathRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the branch whose path becomes the current one
    branch: str = Field(min_length=1, max_length=100)


def _points(tree: ChatTree) -> list[BranchPoint]:
    """The branch points: at each (parent, index) where branches fork, the parent's own
    message there (when it still has one) and each branch forking there."""
    rows = {b.id: BranchRow(b.id, b.parent, b.fork) for b in tree.branches}
    here = chain(rows, tree.current)
    shown_end = tree.info.message_count

    def shown(branch: str, index: int) -> bool:
        return index < shown_end and owner_at(here, index).id == branch

    by_id = {b.id: b for b in tree.branches}
    points: dict[tuple[int, str], list[Alternative]] = {}
    for b in tree.branches:
        if b.parent is None:
            continue
        key = (b.fork, b.parent)
        if key not in points:
            parent = by_id[b.parent]
            own = parent.at_forks.get(b.fork)
            points[key] = (
                [
                    Alternative(
                        branch=parent.id, preview=_preview(own), on_path=shown(parent.id, b.fork)
                    )
                ]
                if own is not None
                else []
            )
        points[key].append(
            Alternative(
                branch=b.id,
                preview=_preview(b.first),
                on_path=shown(b.id, b.fork) or b.id == tree.current,
            )
        )
    return [
        BranchPoint(index=index, alternatives=alts) for (index, _), alts in sorted(points.items())
    ]


def _preview(first: dict[str, Any] | None) -> BranchPreview | None:
    if first is None:
        return None
    text = first.get("mes")
    text = " ".join(text.split()) if isinstance(text, str) else ""
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    name = first.get("name")
    return BranchPreview(
        name=name if isinstance(name, str) else "",
        is_user=bool(first.get("is_user")),
        text=text,
    )


@router.get("/{chat_id}/tree")
async def get_tree(chat_id: str, tk: UserTavern) -> TreeBody:
    """The chat's branches and which path is current (a chat that never branched: one
    branch, ``main``)."""
    return TreeBody.of(await tk.chats.tree(chat_id))


async def _refuse_while_generating(state: ServerState, tk: UserTavern, chat_id: str) -> None:
    """409 while a turn of the chat runs in any process (its reply is being written into the
    path a fork or a switch would move)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    turns = state.turns
    if await turns.lock.holder(turns.chat_key(tk.owner, info.id)) is not None:
        raise ChatBusy(info.id)


@router.post("/{chat_id}/tree", status_code=201)
async def fork_chat(chat_id: str, body: ForkRequest, tk: UserTavern, state: State) -> TreeBody:
    """Start a new, empty branch at message ``index`` and make it current: the chat now ends
    before ``index``; the messages from it on stay in their branch."""
    await _refuse_while_generating(state, tk, chat_id)
    await tk.chats.fork(chat_id, body.index)
    return TreeBody.of(await tk.chats.tree(chat_id))


@router.put("/{chat_id}/path")
async def set_path(chat_id: str, body: PathRequest, tk: UserTavern, state: State) -> TreeBody:
    """Make ``branch``'s path the chat's current one (404 naming an unknown branch; 409
    while a turn generates)."""
    await _refuse_while_generating(state, tk, chat_id)
    await tk.chats.switch_branch(chat_id, body.branch)
    return TreeBody.of(await tk.chats.tree(chat_id))


@router.get("/{chat_id}/tree/export")
async def export_tree(chat_id: str, tk: UserTavern) -> Response:
    """The whole tree as one JSON document (format ``tavernkit-chat-tree``: see
    :mod:`tavernkit.chat.tree_export`)."""
    tree = await tk.chats.tree(chat_id)
    chat = await tk.chats.load(tree.info.id)
    parked = await tk.store.load_parked(tree.info.id, owner=tk.owner)
    document = tree_document(chat, tree, parked)
    filename = quote(f"{tree.info.name}.tree.json")
    return Response(
        json.dumps(document, ensure_ascii=False, indent=1),
        media_type="application/json",
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"},
    )
