"""``POST /chats/{chat_id}/script``: run an STscript (SillyTavern's slash commands) on a chat.

The script runs as the signed-in user, on their own records (``UserTavern``): messages,
variables, script injections and quick-reply sets change in their store as it goes. Each
generation it starts (``/gen``, ``/genraw``, ``/trigger``, a quick reply that sends …) is
counted against the user's turn rate first (``admit_turn``: 429 past the limit), and the run
has the engine's step and time budgets. A script that does not parse or fails answers 200 with
``error`` set (SillyTavern's name, message, line, column and hint): what it did before that is
kept, as in SillyTavern.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.state import ServerState, server_state

__all__ = ["router"]

router = APIRouter(tags=["chats"])
State = Annotated[ServerState, Depends(server_state)]


class ScriptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    script: str = Field(max_length=100_000)
    #: what the input box holds (``{{input}}``, a quick reply's injected text)
    input: str = Field("", max_length=100_000)


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


@router.post("/chats/{chat_id}/script", response_model=ScriptResult)
async def run_script(
    chat_id: str, body: ScriptBody, principal: CurrentPrincipal, tk: UserTavern, state: State
) -> Any:
    """Run ``script`` on the chat and answer its result, toasts and input box."""

    async def admit() -> None:
        await state.admit_turn(principal)

    outcome = await tk.run_script(chat_id, body.script, admit=admit, input_text=body.input)
    return outcome.to_json()
