"""The quick-reply bar of a chat, binding Quick Reply sets to a chat or a character, and
clicking a button.

- ``GET /chats/{chat_id}/quick-replies``: ``{"sets": [...], "linked": [...], "bindings"}``,
  the sets bound globally, to the chat and to its character, in that order, each SillyTavern's
  set object with ``scope`` (``global``/``chat``/``character``) and ``visible``; ``linked``:
  the other sets their replies' context menus (``contextList``) open; ``bindings``: every
  set's name (``sets``) and the ``global``, ``chat`` and ``character`` lists by name;
- ``PUT /settings/quick-replies`` ``{"sets": ["name", ...]}``: the global list;
- ``PUT /chats/{chat_id}/quick-replies`` ``{"sets": [{"set", "isVisible"}]}``: the chat's list
  (SillyTavern's ``chat_metadata.quickReply``), answered as it is now;
- ``GET``/``PUT /characters/{ref}/quick-replies`` ``{"sets": ["name", ...]}``: the
  character's list (kept in its card);
- ``POST /chats/{chat_id}/quick-replies/click`` ``{"set", "id" | "label", "input", "auto",
  "parent"}``:
  the button, as SillyTavern's: a script runs (answered as ``POST /chats/{id}/script`` is), a
  text is sent as the user's message, or left in the input box (``input``) when the set has
  ``disableSend``; ``auto`` runs it as an automatic execution does. Each generation a click
  starts counts against the user's turn rate. With ``interactive``, a script that asks the
  user answers its questions as ``POST /chats/{id}/script`` does. ``parent`` ``{"set", "id" |
  "label"}``: the reply was picked from that reply's context menu; when its link is chained
  (``isChained``) the parent's message runs first (``parent | reply``), and ``%%parent%%`` is
  the parent's label, as in SillyTavern's menu.

Sets themselves (create, import, export, delete) are documents: ``/quick-replies/{name}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tavernkit.chat.script_host import ScriptOutcome
from tavernkit.quick_reply_bindings import QuickReplyBindings
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.routes.scripts import ScriptStep, run_interactive
from tavernkit.server.state import ServerState, server_state
from tavernkit.stscript import Asker, SetLink

__all__ = ["router"]

router = APIRouter(tags=["quick replies"])
State = Annotated[ServerState, Depends(server_state)]
Name = Annotated[str, Field(min_length=1, max_length=200)]


class ChatLink(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    set: Name
    is_visible: bool = Field(True, alias="isVisible")


class ChatSetsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sets: list[ChatLink] = Field(max_length=200)


class CharacterSetsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sets: list[Name] = Field(max_length=200)


class ReplyRef(BaseModel):
    """A reply of a set: its id, or (without one) its label."""

    model_config = ConfigDict(extra="forbid")

    set: Name
    id: int | None = None
    label: str | None = Field(None, max_length=1000)

    @model_validator(mode="after")
    def _one_reply(self) -> ReplyRef:
        if self.id is None and self.label is None:
            raise ValueError("give the reply's id or its label")
        return self

    def key(self) -> int | str:
        return self.id if self.id is not None else str(self.label)


class ClickBody(ReplyRef):
    #: what the input box holds (joined to the reply when the set has ``injectInput``)
    input: str = Field("", max_length=100_000)
    #: run as an automatic execution does (``/run``'s way: no input joined) instead of a click
    auto: bool = False
    #: a script asks the user through this request (as ``POST /chats/{id}/script`` does)
    interactive: bool = False
    #: the reply whose context menu this one was picked from
    parent: ReplyRef | None = None


def _bindings(tk: Any) -> QuickReplyBindings:
    return QuickReplyBindings(tk.store, tk.owner)


@router.get("/chats/{chat_id}/quick-replies")
async def chat_bar(chat_id: str, tk: UserTavern) -> dict[str, Any]:
    """The sets on the chat's quick-reply bar, and those its context menus open."""
    bindings = _bindings(tk)
    bar = await bindings.bar(chat_id)
    linked = await bindings.linked(chat_id, bar)
    return {
        "sets": [item.to_json() for item in bar],
        "linked": [qr_set.st_json() for qr_set in linked],
        "bindings": await bindings.bindings(chat_id),
    }


@router.put("/chats/{chat_id}/quick-replies")
async def bind_chat(chat_id: str, body: ChatSetsBody, tk: UserTavern) -> dict[str, Any]:
    """Bind sets to the chat (the chat's whole list, in order)."""
    links = [SetLink(link.set, link.is_visible) for link in body.sets]
    bound = await _bindings(tk).bind_chat(chat_id, links)
    return {"sets": [link.st_json() for link in bound]}


@router.put("/settings/quick-replies")
async def bind_global(body: CharacterSetsBody, tk: UserTavern) -> dict[str, Any]:
    """Bind sets globally (the whole list, in order: every chat's bar)."""
    return {"sets": await _bindings(tk).bind_global(body.sets)}


@router.get("/characters/{ref}/quick-replies")
async def character_sets(ref: str, tk: UserTavern) -> dict[str, Any]:
    """The sets bound to the character."""
    return {"sets": await _bindings(tk).character_sets(ref)}


@router.put("/characters/{ref}/quick-replies")
async def bind_character(ref: str, body: CharacterSetsBody, tk: UserTavern) -> dict[str, Any]:
    """Bind sets to the character (its whole list, in order; kept in the card)."""
    return {"sets": await _bindings(tk).bind_character(ref, body.sets)}


@router.post("/chats/{chat_id}/quick-replies/click", response_model=ScriptStep)
async def click(
    chat_id: str, body: ClickBody, principal: CurrentPrincipal, tk: UserTavern, state: State
) -> Any:
    """Click a quick reply on the chat."""

    async def admit() -> None:
        await state.admit_turn(principal)

    mode: Literal["click", "run"] = "run" if body.auto else "click"
    parent = (body.parent.set, body.parent.key()) if body.parent is not None else None

    async def work(asker: Asker | None) -> ScriptOutcome:
        return await tk.run_quick_reply(
            chat_id,
            body.set,
            body.key(),
            admit=admit,
            input_text=body.input,
            mode=mode,
            asker=asker,
            parent=parent,
        )

    if body.interactive:
        return await run_interactive(state, tk, chat_id, work)
    return (await work(None)).to_json()
