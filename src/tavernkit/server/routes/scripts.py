"""``POST /chats/{chat_id}/script``: run an STscript (SillyTavern's slash commands) on a chat.

The script runs as the signed-in user, on their own records (``UserTavern``): messages,
variables, script injections and quick-reply sets change in their store as it goes. Each
generation it starts (``/gen``, ``/genraw``, ``/trigger``, a quick reply that sends …) is
counted against the user's turn rate first (``admit_turn``: 429 past the limit), and the run
has the engine's step and time budgets. A script that does not parse or fails answers 200 with
``error`` set (SillyTavern's name, message, line, column and hint): what it did before that is
kept, as in SillyTavern.

A script that waits for the user (``/input``, ``/popup``, ``/buttons``, ``/echo
awaitDismissal``) is answered as SillyTavern answers when no one presses anything (``/input``
its ``default=``, the others what a cancel returns), unless the body says ``"interactive":
true`` (:mod:`tavernkit.server.script_runs`): then the route answers each question as it comes,
``{"status": "asking", "run", "question": {"id", "kind", "text", …}}``, and
``POST /chats/{chat_id}/script/runs/{run}/answer`` ``{"question", "button", "text",
"chosen"}`` gives the user's answer and answers the next step, until
``{"status": "done", …the result…}``. ``GET /chats/{chat_id}/script/runs`` lists the caller's
runs on the chat that wait for an answer, ``{"runs": [{"status": "asking", "run", "question"},
…]}``: a page reloaded while a question was open asks it again. With several processes
both routes work through any of them (the question is shared, the answer relayed to the
run's process: :mod:`tavernkit.server.script_runs`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.chat.script_host import ScriptOutcome
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.coordination import RelayedAnswer
from tavernkit.server.state import ServerState, server_state
from tavernkit.stscript import Asker

__all__ = ["ScriptStep", "router", "run_interactive"]

router = APIRouter(tags=["chats"])
State = Annotated[ServerState, Depends(server_state)]


class ScriptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    script: str = Field(max_length=100_000)
    #: what the input box holds (``{{input}}``, a quick reply's injected text)
    input: str = Field("", max_length=100_000)
    #: ask the user through this request and the answer route (otherwise no one is asked)
    interactive: bool = False


class ScriptErrorReport(BaseModel):
    name: str
    message: str
    line: int
    column: int
    hint: str


class ScriptToast(BaseModel):
    type: str
    message: str
    title: str | None = None
    options: dict[str, Any] | None = None


class ScriptResult(BaseModel):
    #: the last command's result (``''`` when the script was aborted or failed)
    pipe: str
    aborted: bool
    abort_reason: str | None = None
    error: ScriptErrorReport | None = None
    #: the toasts SillyTavern would have shown (``/echo``, warnings)
    toasts: list[ScriptToast]
    #: popups and notes (``return=popup-html`` …)
    shown: list[str]
    #: the input box afterwards (``/setinput``, a quick reply that does not send)
    input: str
    #: ``done`` (an interactive run's last step; a plain run's only answer)
    status: Literal["done"] = "done"


class ScriptQuestion(BaseModel):
    """What the script asks (SillyTavern's popup): see :class:`tavernkit.stscript.Question`."""

    id: int
    kind: Literal["input", "popup", "buttons", "echo"]
    text: str
    default: str
    ok_button: str | None
    cancel_button: str | None
    labels: list[str]
    multiple: bool
    large: bool
    wide: bool
    rows: int
    severity: str
    title: str | None


class ScriptAsking(BaseModel):
    """An interactive run waiting for the answer to ``question``."""

    status: Literal["asking"]
    run: str
    question: ScriptQuestion


ScriptStep = ScriptResult | ScriptAsking


class PendingRuns(BaseModel):
    """The caller's runs on a chat that wait for an answer, each with its question."""

    runs: list[ScriptAsking]


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the question's ``id``
    question: int = Field(ge=1)
    #: ``ok`` (OK, or a /buttons choice), ``cancel`` (the popup's second button), null: closed
    button: Literal["ok", "cancel"] | None = None
    #: what /input's box held
    text: str = Field("", max_length=100_000)
    #: the /buttons labels chosen (their indexes)
    chosen: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, max_length=1000)


async def run_interactive(
    state: ServerState,
    tk: Any,
    chat_id: str,
    work: Callable[[Asker], Awaitable[ScriptOutcome]],
) -> dict[str, Any]:
    """Start ``work`` as an interactive run of ``tk``'s owner and answer its first step."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)  # NotFound before it starts
    runs = state.script_runs
    run = runs.start(tk.owner, info.id, work)
    return await runs.next_step(run)


@router.post("/chats/{chat_id}/script", response_model=ScriptStep)
async def run_script(
    chat_id: str, body: ScriptBody, principal: CurrentPrincipal, tk: UserTavern, state: State
) -> Any:
    """Run ``script`` on the chat and answer its result, toasts and input box (with
    ``interactive``: its first question, or that)."""

    async def admit() -> None:
        await state.admit_turn(principal)

    if body.interactive:

        async def work(asker: Asker) -> ScriptOutcome:
            return await tk.run_script(
                chat_id, body.script, admit=admit, input_text=body.input, asker=asker
            )

        return await run_interactive(state, tk, chat_id, work)
    outcome = await tk.run_script(chat_id, body.script, admit=admit, input_text=body.input)
    return outcome.to_json()


@router.get("/chats/{chat_id}/script/runs", response_model=PendingRuns)
async def pending_runs(chat_id: str, tk: UserTavern, state: State) -> Any:
    """The caller's interactive runs on the chat waiting for an answer, with their questions
    (another user's runs are not listed)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    return {"runs": await state.script_runs.pending(tk.owner, info.id)}


@router.post("/chats/{chat_id}/script/runs/{run_id}/answer", response_model=ScriptStep)
async def answer(chat_id: str, run_id: str, body: AnswerBody, tk: UserTavern, state: State) -> Any:
    """Answer the question an interactive run of the caller's is waiting on; answers the
    run's next step (another question, or its result). A run of another process (several
    processes) gets the answer there, and what that process answered is answered here."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    step = await state.script_runs.answer(tk.owner, info.id, run_id, body.model_dump())
    if isinstance(step, RelayedAnswer):
        if step.status == 200:
            return step.body  # through the response model, as a step taken here
        return JSONResponse(dict(step.body), status_code=step.status, headers=dict(step.headers))
    return step
