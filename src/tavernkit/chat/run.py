"""Step 5 of a chat turn: send the prepared request through the turn runner.

Both prompt families go through :func:`~tavernkit.generation.turn.run_turn`: a chat prompt as a
:class:`~tavernkit.generation.attempt.chat_prompt.TurnPrompt`, a text-completion prompt
(kobold, textgen,
NovelAI, the embedded model in text mode) as a
:class:`~tavernkit.generation.attempt.text_prompt.TextTurnPrompt`, where a manual prefill is the
prompt's tail. So key rotation, fallbacks, continuation of a cut stream and the request hooks
hold for every chat turn alike.

The main chat's plugin hooks run here (``request_scope="main"``): ``before_chat_turn`` may
replace the built request, every outgoing request passes ``before_request``, and
``after_chat_turn`` sees the result whatever its status. ``generate_task`` and the other
background calls are ``extension_internal`` and never reach this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pluggy

from tavernkit.chat.deps import TurnDeps
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.attempt.chat_prompt import TurnPrompt
from tavernkit.generation.attempt.text_prompt import TextTurnPrompt
from tavernkit.generation.hooks import before_request_hook, chat_turn_hooks
from tavernkit.generation.options import TurnOptions
from tavernkit.generation.plan import Plan
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import ResponseSink
from tavernkit.generation.turn import run_turn
from tavernkit.providers.request import ChatPrompt, PromptRequest, TextPrompt

__all__ = ["ChatRequest", "ReshapeRequest", "hooked_request", "run_request", "turn_prompt"]


#: the chat request post-processed for another chat-completion source, from the blocks
ReshapeRequest = Callable[[str], ChatPrompt]


def turn_prompt(
    request: PromptRequest,
    prefill: str = "",
    *,
    source: str = "",
    reshape: ReshapeRequest | None = None,
) -> TurnPrompt | TextTurnPrompt:
    """The runner's form of a chat turn's request (history trimmable per attempt).
    ``source``: the source ``request`` was post-processed for; ``reshape`` remakes it for an
    attempt on another source (see :meth:`TurnPrompt.for_source`)."""
    if isinstance(request, TextPrompt):
        return TextTurnPrompt.from_text_prompt(request, prefill=prefill)
    if reshape is None:
        return TurnPrompt.from_chat_prompt(request, prefill=prefill, source=source)
    remake = reshape

    def shaped(other: str) -> TurnPrompt:
        return TurnPrompt.from_chat_prompt(remake(other), prefill=prefill, source=other)

    return TurnPrompt.from_chat_prompt(request, prefill=prefill, source=source, reshape=shaped)


def hooked_request(
    plugins: pluggy.PluginManager | None,
    chat_id: str | None,
    kind: str,
    request: PromptRequest,
    *,
    stream: bool = True,
) -> PromptRequest:
    """The request a main-chat turn would send once the plugins' ``before_chat_turn`` and
    ``before_request`` hooks have had it, for the prompt inspector. The hooks run for real
    (a preview cannot know what a hook would do without calling it), so a hook that counts
    or logs sees a preview as a turn; ``after_chat_turn`` is not called, as no turn ends."""
    request = chat_turn_hooks(plugins, "main").before(chat_id, kind, request)
    hook = before_request_hook(plugins, "main")
    changed = hook(request, stream) if hook is not None else None
    return request if changed is None else changed


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One reply's request as a chat turn sends it: the chat and generation type the plugins'
    hooks see, the manual ``prefill``, the chat-completion ``source`` the request was
    post-processed for, and ``reshape``, which remakes it from the blocks for a fallback
    attempt on another source."""

    request: PromptRequest
    chat_id: str | None
    kind: str
    prefill: str = ""
    source: str = ""
    reshape: ReshapeRequest | None = None


async def run_request(
    deps: TurnDeps,
    plan: Plan,
    call: ChatRequest,
    sink: ResponseSink,
    options: TurnOptions,
    abort: AbortSignal | None = None,
) -> TurnResult:
    """Stage *generate*: one reply through ``plan`` to ``sink``; provider failures end in a
    failed result, never raise. ``options`` says how (stream, names, the tools the turn offers
    and their rounds, the text a continued reply already holds, response review); the plugins'
    ``before_request`` hook and the turn's id are added here. A request a
    ``before_chat_turn`` hook replaced is the hook's and is sent as it is (not reshaped)."""
    hooks = chat_turn_hooks(deps.plugins, "main")
    request = hooks.before(call.chat_id, call.kind, call.request)
    reshape = call.reshape if request is call.request else None
    options = replace(
        options,
        before_request=before_request_hook(deps.plugins, "main"),
        turn_id=f"{call.chat_id or '-'}:{call.kind}",
    )
    result = await run_turn(
        plan,
        turn_prompt(request, call.prefill, source=call.source, reshape=reshape),
        sink,
        clock=deps.clock,
        sleep=deps.sleep,
        options=options,
        abort=abort,
    )
    hooks.after(call.chat_id, call.kind, result)
    return result
