"""The task envelope: a preset-aware prompt around task messages (``generate_task``).

A background task (summaries, tool loops, extension calls) wants the user's preset applied —
main prompt, persona, world info, post-history instructions, in-chat prompts — but its own
messages in place of the chat. The preset's order is followed; the task messages fill the
``chatHistory`` marker (tool calls kept whole with their results); without the character card
the card's markers (description, personality, scenario, examples, depth prompt, its prompt
overrides) are empty while persona and world info stay.

With ``literal_task_messages`` the task messages are not macro-evaluated by the build (the
history walk evaluates chat messages, as SillyTavern does): a caller that evaluated them itself
(side effects stripped) or wants them sent as written (``substitute_macros=False``, editing
flows where ``{{user}}`` must reach the model literally) sets it; the rest of the envelope is
evaluated as in a chat turn either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from tavernkit.errors import FormatError
from tavernkit.models.character import Character
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.prompt.assembled import AssembledChat
from tavernkit.prompt.chat_completion import build_chat_completion
from tavernkit.prompt.chat_history import OpenAIMessage
from tavernkit.prompt.extensions import worldinfo_outlets
from tavernkit.prompt.macros import MacroSubstitute, macro_substitute
from tavernkit.prompt.state import PromptState, Substitute
from tavernkit.text.tokens import Tokenizer
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = [
    "EnvelopeOptions",
    "build_preset_aware_prompt_messages",
    "build_task_envelope",
    "task_history",
]

_ROLES = ("system", "user", "assistant", "tool")


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("text")
        )
    raise FormatError("content must be a string or a list of parts", field=where)


def task_history(task_messages: Sequence[Mapping[str, Any]]) -> list[OpenAIMessage]:
    """OpenAI-shaped task messages as history items, oldest first; an assistant message with
    ``tool_calls`` absorbs the ``tool`` results that answer it, so they fit or drop together."""
    out: list[OpenAIMessage] = []
    pending: dict[str, dict[str, Any]] = {}
    for i, message in enumerate(task_messages):
        where = f"task_messages[{i}]"
        role = message.get("role")
        if role not in _ROLES:
            raise FormatError(f"unknown role {role!r}", field=f"{where}.role")
        content = _text(message.get("content"), f"{where}.content")
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            invocation = pending.get(call_id)
            if invocation is None:
                raise FormatError("tool result without a matching tool call", field=where)
            invocation["result"] = content
            continue
        calls = message.get("tool_calls") or []
        invocations: list[dict[str, Any]] = []
        for call in calls:
            function = call.get("function") or {}
            invocation = {
                "id": call.get("id"),
                "name": function.get("name"),
                "parameters": function.get("arguments", ""),
                "result": None,
            }
            invocations.append(invocation)
            pending[str(call.get("id"))] = invocation
        out.append(
            OpenAIMessage(
                role=str(role),
                content=content,
                name=str(message.get("name") or ""),
                invocations=tuple(invocations),
            )
        )
    return out


class EnvelopeOptions(TypedDict, total=False):
    """:func:`build_task_envelope`'s keyword options: ``include_character_card`` (off: only
    the character's name is kept, and the chat's own scenario, example messages and system
    prompt are dropped), the ``preset`` in place
    of the state's, the generation ``kind``, ``tokenizer``, ``substitute`` and ``compat`` as
    :func:`~.chat_completion.build_chat_completion` takes them, and
    ``literal_task_messages`` (the task messages' macros left as written: see the module
    docstring)."""

    include_character_card: bool
    preset: ChatCompletionPreset | None
    kind: str
    tokenizer: Tokenizer | None
    substitute: Substitute | None
    compat: str
    literal_task_messages: bool


def build_task_envelope(
    state: PromptState,
    wi: WorldInfoResult | None,
    task_messages: Sequence[Mapping[str, Any]],
    **options: Unpack[EnvelopeOptions],
) -> AssembledChat:
    """The preset's prompt with ``task_messages`` in place of the chat history (pure; the
    options: :class:`EnvelopeOptions`)."""
    unknown = sorted(set(options) - set(EnvelopeOptions.__annotations__))
    if unknown:
        raise TypeError(f"build_task_envelope() got an unexpected keyword argument {unknown[0]!r}")
    o = options
    preset, substitute = o.get("preset"), o.get("substitute")
    compat = o.get("compat", "default")
    if preset is not None:
        state = state.replace(preset=preset)
    if not o.get("include_character_card", True):
        metadata = state.chat_metadata
        if metadata is not None:
            metadata = metadata.model_copy(
                update={"scenario": None, "mes_example": None, "system_prompt": None}
            )
        state = state.replace(
            character=Character(name=state.character.name), chat_metadata=metadata
        )
    history = task_history(task_messages)
    if o.get("literal_task_messages", False):
        if substitute is None:
            substitute = macro_substitute(state, outlets=worldinfo_outlets(wi), compat=compat)
        substitute = _skipping(substitute, frozenset(id(m.content) for m in history if m.content))
    return build_chat_completion(
        state,
        wi,
        kind=o.get("kind", "normal"),
        tokenizer=o.get("tokenizer"),
        compat=compat,
        substitute=substitute,
        history=history,
    )


class _SkippingMacroSubstitute(MacroSubstitute):
    """The build's evaluator, except for the task messages' own text objects.

    The history walk hands each message's ``content`` object to the evaluator unchanged, so
    identity (not equality) picks out exactly the task messages: a preset prompt that happens
    to hold the same words is still evaluated.
    """

    def __init__(self, base: MacroSubstitute, skip: frozenset[int]) -> None:
        super().__init__(base.env, compat=base.compat)
        self._skip = skip

    def __call__(
        self,
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str:
        if id(text) in self._skip:
            return text
        return super().__call__(text, original=original, dynamic=dynamic)


def _skipping(substitute: Substitute, skip: frozenset[int]) -> Substitute:
    if isinstance(substitute, MacroSubstitute):
        # a MacroSubstitute, so the builder can still bind the card fields into its env
        return _SkippingMacroSubstitute(substitute, skip)

    def evaluate(
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str:
        if id(text) in skip:
            return text
        return substitute(text, original=original, dynamic=dynamic)

    return evaluate


#: The name the API exposes it under.
build_preset_aware_prompt_messages = build_task_envelope
