"""Chat turns over HTTP: start one, watch its events (SSE, resumable, joinable), stop it.

``POST /chats/{chat}/turns`` answers 202 with the turn id as soon as the turn is checked and
started (:class:`~tavernkit.server.turns.TurnHub`); the turn then belongs to the server. Asked
with ``Accept: text/event-stream`` it answers the turn's events instead, as the watch below
streams them: one round trip to the first token instead of two.
``GET .../turns/{turn}/events`` streams the turn's log from the start, or from after the
``Last-Event-ID`` header (or ``?after=``) on a reconnect; any number of clients may watch one
turn. A client that goes away stops only its own stream. ``DELETE .../turns/{turn}`` stops
the turn, in whichever process runs it; what it showed stays stored.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tavernkit.errors import FormatError, GenerateTaskError, NotFound
from tavernkit.facade import Tavern
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.coordination import TurnEvent
from tavernkit.server.principal import Principal
from tavernkit.server.sse import sse_event, sse_response
from tavernkit.server.state import ServerState, server_state
from tavernkit.server.task_errors import task_error_response
from tavernkit.server.turn_request import TurnRequest
from tavernkit.server.turns import TurnHub

__all__ = ["TurnOverridesBody", "TurnStartedBody", "admit_turn", "begin_turn", "router"]

router = APIRouter(tags=["turns"])

log = logging.getLogger(__name__)

State = Annotated[ServerState, Depends(server_state)]


class TurnOverridesBody(BaseModel):
    """Per-turn choices that win over the stored selections."""

    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(None, max_length=200)
    persona: str | None = Field(None, max_length=200)
    model: str | None = Field(None, max_length=200)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    compat: str | None = Field(None, max_length=40)


class TurnBody(BaseModel):
    """A turn to start: ``kind`` is the verb; ``text`` and ``attachments`` (image URLs) are
    the user's message of a ``send``; ``interrupt`` stops a running turn of the chat instead
    of answering 409."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["send", "swipe", "regenerate", "continue", "impersonate"] = "send"
    text: str = Field("", max_length=200_000)
    attachments: list[str] = Field(default_factory=list, max_length=16)
    prefill: str | None = Field(None, max_length=20_000)
    overrides: TurnOverridesBody | None = None
    interrupt: bool = False
    #: a ``send`` or ``regenerate`` in place of message ``at``, on a new branch of the chat
    #: (the messages from ``at`` on stay reachable: ``GET /chats/{id}/tree``)
    at: int | None = Field(None, ge=1, le=10_000_000)


class TurnStartedBody(BaseModel):
    turn_id: str
    chat_id: str
    kind: str
    #: where the turn's events stream
    events: str


class TurnStopped(BaseModel):
    #: whether the turn was still running (and is now stopped)
    stopped: bool


async def turn_hub(state: State) -> TurnHub:
    # a coroutine: FastAPI runs a plain function dependency in a worker thread
    return state.turns


Hub = Annotated[TurnHub, Depends(turn_hub)]


@router.post(
    "/chats/{chat_id}/turns",
    status_code=202,
    response_model=TurnStartedBody,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "With `Accept: text/event-stream`: the turn's events from its start, "
            "as `GET .../events` streams them (`Location` names that stream, `X-Turn-Id` the "
            "turn): one request instead of two.",
        }
    },
)
async def start_turn(
    chat_id: str,
    body: TurnBody,
    principal: CurrentPrincipal,
    tk: UserTavern,
    state: State,
    accept: Annotated[str | None, Header(max_length=1000)] = None,
) -> Any:
    """Start a turn of the chat (409 when the chat is generating, unless ``interrupt``).
    Asked with ``Accept: text/event-stream``, the answer is the turn's event stream itself
    (the turn still belongs to the server: a client that goes away stops only its stream,
    and reconnects to ``Location`` with ``Last-Event-ID``)."""
    overrides = body.overrides.model_dump(exclude_none=True) if body.overrides else None
    request = TurnRequest(
        kind=body.kind,
        text=body.text,
        attachments=tuple(body.attachments),
        prefill=body.prefill,
        overrides=overrides,
        interrupt=body.interrupt,
        at=body.at,
    )
    await admit_turn(state, principal, tk, chat_id, interrupt=body.interrupt)
    started = await begin_turn(state, tk, chat_id, request)
    if not isinstance(started, TurnStartedBody) or not _wants_events(accept):
        return started
    hub = state.turns
    events = hub.log.read(started.turn_id, None)
    key = hub.chat_key(tk.owner, started.chat_id)
    response = sse_response(_frames(hub.watched(events, key, started.turn_id)))
    response.headers["location"] = started.events
    response.headers["x-turn-id"] = started.turn_id
    return response


def _wants_events(accept: str | None) -> bool:
    """Whether the client asked for the event stream (``text/event-stream`` among the types
    it accepts, not refused with ``q=0``)."""
    for part in (accept or "").lower().split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media == "text/event-stream":
            for param in params:
                name, _, value = param.partition("=")
                if name.strip() == "q":
                    try:
                        return float(value) > 0
                    except ValueError:
                        return False
            return True
    return False


async def admit_turn(
    state: ServerState, principal: Principal, tk: Tavern, chat_id: str, *, interrupt: bool
) -> None:
    """Count a turn against the caller's turn rate, as :data:`ModelCall` does, except a start
    that would be refused because the chat is generating: that 409 comes first and counts
    nothing (a client retrying a busy chat must not use up its rate)."""
    if not interrupt:
        await state.turns.refuse_if_busy(tk.owner, chat_id)
    await state.admit_turn(principal)


async def begin_turn(state: ServerState, tk: Tavern, chat_id: str, request: TurnRequest) -> Any:
    """Start the turn on the hub and answer where its events stream (what every
    turn-starting route answers; the route counted it with :func:`admit_turn`)."""
    try:
        started = await state.turns.start(tk.chats, chat_id, request)
    except GenerateTaskError as exc:
        return task_error_response(exc)
    return TurnStartedBody(
        turn_id=started.turn_id,
        chat_id=started.chat_id,
        kind=started.kind,
        events=f"/chats/{started.chat_id}/turns/{started.turn_id}/events",
    )


async def _owned_turn(tk: Tavern, hub: TurnHub, chat_id: str, turn_id: str) -> str:
    """The chat's id, when the turn is of a chat the caller owns; 404 otherwise (the same
    answer for another user's turn as for no turn, so ids cannot be probed). A turn this
    process runs for the caller's owner on that chat id needs no store read: its start
    checked the chat for that owner (the watch that follows a POST is answered at once)."""
    if hub.runs_for(turn_id, hub.chat_key(tk.owner, chat_id)):
        return chat_id
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    if await hub.turn_chat(turn_id) != info.id:
        raise NotFound(f"no turn {turn_id!r} in this chat")
    return info.id


@router.get(
    "/chats/{chat_id}/turns/{turn_id}/events",
    response_class=Response,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def turn_events(
    chat_id: str,
    turn_id: str,
    tk: UserTavern,
    hub: Hub,
    last_event_id: Annotated[str | None, Header(max_length=100)] = None,
    after: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """The turn's events as SSE (``id``, ``event``: text, withdraw, reasoning, tool, notice, error,
    done; ``data``: JSON), from after ``Last-Event-ID`` (or ``after``) when given."""
    chat = await _owned_turn(tk, hub, chat_id, turn_id)
    since = last_event_id if last_event_id is not None else after
    try:
        events = hub.log.read(turn_id, since or None)
    except ValueError as exc:
        raise FormatError(str(exc), field="Last-Event-ID") from None
    except KeyError:
        raise NotFound(f"no turn {turn_id!r} in this chat") from None
    return sse_response(_frames(hub.watched(events, hub.chat_key(tk.owner, chat), turn_id)))


#: the last event of a stream whose turn's log could not be read to its ``done`` (Redis
#: unreachable for long, a log that expired): no ``id``, so a client's ``Last-Event-ID`` stays
#: the last real event, which it reconnects with
CUT_SHORT = {
    "class": "EventsUnavailable",
    "code": "unavailable",
    "message": "the turn's events could not be read on; reconnect to read the rest",
}


async def _frames(events: AsyncIterator[TurnEvent]) -> AsyncIterator[bytes]:
    """The events as SSE frames; a stream always ends with ``done`` or ``error``."""
    finished = False
    try:
        async for event in events:
            finished = event.type == "done"
            yield sse_event(event.id, event.type, event.data)
    except Exception as exc:  # the log failed mid-stream: the client still gets an end
        log.warning("a turn's event stream was cut short (%s)", type(exc).__name__)
    if not finished:
        yield sse_event(None, "error", CUT_SHORT)


@router.delete("/chats/{chat_id}/turns/{turn_id}", response_model=TurnStopped)
async def stop_turn(chat_id: str, turn_id: str, tk: UserTavern, hub: Hub) -> Any:
    """Stop the turn; what it delivered stays stored and in its events."""
    owned = await _owned_turn(tk, hub, chat_id, turn_id)
    # answered once the shown text is stored, by this process or the one running the turn
    stopped = await hub.stop_anywhere(tk.owner, owned, turn_id)
    return TurnStopped(stopped=stopped)
