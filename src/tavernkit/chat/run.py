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

import asyncio
import time
from collections.abc import Callable, Sequence

import pluggy

from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.attempt.chat_prompt import TurnPrompt
from tavernkit.generation.attempt.sending import Sleep
from tavernkit.generation.attempt.text_prompt import TextTurnPrompt
from tavernkit.generation.hooks import before_request_hook, chat_turn_hooks
from tavernkit.generation.options import TurnOptions
from tavernkit.generation.plan import Plan
from tavernkit.generation.result import TurnResult
from tavernkit.generation.review import ReviewConfig
from tavernkit.generation.sink import ResponseSink
from tavernkit.generation.turn import run_turn
from tavernkit.providers.request import ChatPrompt, PromptRequest, TextPrompt
from tavernkit.tools.loop import DEFAULT_MAX_ROUNDS
from tavernkit.tools.registry import FunctionTool

__all__ = ["ReshapeRequest", "hooked_request", "run_request", "turn_prompt"]


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


async def run_request(
    plan: Plan,
    request: PromptRequest,
    sink: ResponseSink,
    *,
    chat_id: str | None,
    kind: str,
    plugins: pluggy.PluginManager | None = None,
    prefill: str = "",
    stream: bool = True,
    abort: AbortSignal | None = None,
    char_name: str = "",
    user_names: tuple[str, ...] = (),
    continues: str = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
    tools: Sequence[FunctionTool] = (),
    max_tool_rounds: int = DEFAULT_MAX_ROUNDS,
    review: ReviewConfig | None = None,
    source: str = "",
    reshape: ReshapeRequest | None = None,
) -> TurnResult:
    """Run one reply through ``plan`` to ``sink``; provider failures end in a failed
    result, never raise. ``tools`` are the ones the turn offers (see :mod:`.tools`): the
    runner runs the calls the model makes, at most ``max_tool_rounds`` rounds, then asks for
    the reply with tools off. ``continues`` is the text a continued reply already holds (its
    echo is stripped). ``review`` turns response review on (see :mod:`.review_setup`).
    ``source`` is the chat-completion source ``request`` was post-processed for and
    ``reshape`` remakes it from the blocks for a fallback attempt on another source; a
    request a ``before_chat_turn`` hook replaced is the hook's and is sent as it is."""
    hooks = chat_turn_hooks(plugins, "main")
    built = request
    request = hooks.before(chat_id, kind, request)
    if request is not built:
        reshape = None
    options = TurnOptions(
        stream=stream,
        char_name=char_name,
        user_names=user_names,
        continues=continues,
        before_request=before_request_hook(plugins, "main"),
        turn_id=f"{chat_id or '-'}:{kind}",
        tools=tuple(tools),
        max_tool_rounds=max_tool_rounds,
        review=review,
    )
    result = await run_turn(
        plan,
        turn_prompt(request, prefill, source=source, reshape=reshape),
        sink,
        clock=clock,
        sleep=sleep,
        options=options,
        abort=abort,
    )
    hooks.after(chat_id, kind, result)
    return result
