"""The prompt side of a task: state, world info, macros, envelope, and the shape per family.

Pure functions over a :class:`~tavernkit.models.state.ChatState`, on top of the prompt
engine's own bridges: :func:`~tavernkit.prompt.pipeline.prompt_state` (the state of one
build), :func:`~tavernkit.prompt.from_chat_state.state_substitute` (one macro
evaluator with copies of the chat's and the owner's variables, so a task writes nothing),
:func:`~tavernkit.prompt.envelope.build_task_envelope` (with its task messages kept literal)
and :func:`~tavernkit.prompt.convert.message_from_dict` (OpenAI-shaped dicts to provider
messages). :func:`fold_messages` is the text family's form of a message list: instruct
sequences, or ``Name: text`` lines (also ``TextCompletionService.construct_prompt``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tavernkit.errors import FormatError, GenerateTaskError
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.state import ChatState
from tavernkit.models.templates import InstructTemplate
from tavernkit.prompt.card import CardFields
from tavernkit.prompt.convert import message_from_dict
from tavernkit.prompt.envelope import build_task_envelope
from tavernkit.prompt.extensions import worldinfo_outlets
from tavernkit.prompt.from_chat_state import main_api_of, state_substitute
from tavernkit.prompt.instruct import (
    InstructNames,
    format_instruct_chat,
    format_instruct_prompt,
    instruct_stop_sequences,
)
from tavernkit.prompt.macros import MacroSubstitute, macro_substitute
from tavernkit.prompt.pipeline import PromptTarget, prompt_state
from tavernkit.prompt.state import PromptState, TokenBudgetExceeded
from tavernkit.prompt.wi_scan import scan_world_info
from tavernkit.providers.request import ChatMessage
from tavernkit.text.macros.evaluator import substitute_macros
from tavernkit.tools.calls import coerce_tool_call
from tavernkit.tools.prompt_xml import XmlProtocol
from tavernkit.worldinfo.buffer import scan_chat
from tavernkit.worldinfo.result import WorldInfoResult

if TYPE_CHECKING:
    from tavernkit.generation.profiles import ResolvedConnection
    from tavernkit.text.render import PromptRenderer

__all__ = [
    "Message",
    "build_envelope",
    "connection_prompt_state",
    "fold_messages",
    "has_tool_history",
    "prompt_state_for",
    "scan_task_world_info",
    "substitute_task_messages",
    "to_provider_messages",
]

Message = dict[str, Any]
_ROLES = ("system", "user", "assistant", "tool")
#: the trigger used only to write earlier tool exchanges as text for text-family backends
_HISTORY_TRIGGER = "<Function_Hist_Start/>"


def prompt_state_for(
    state: ChatState,
    *,
    preset: ChatCompletionPreset | None,
    model: str | None,
    source: str,
    api: str,
    text_family: bool,
) -> PromptState:
    """The prompt engine's view of ``state`` for one request to a resolved connection (which
    may not be the active profile: ``api_preset_name``), with ``preset`` (which may not be
    the selected one: ``llm_preset_name``)."""
    target = PromptTarget(
        main_api_of(family="text" if text_family else "chat", api=api), model or None, source
    )
    return prompt_state(state, target).replace(preset=preset)


def connection_prompt_state(
    state: ChatState, connection: ResolvedConnection, preset: ChatCompletionPreset | None
) -> PromptState:
    """:func:`prompt_state_for` a resolved connection, in the family it speaks."""
    return prompt_state_for(
        state,
        preset=preset,
        model=connection.model,
        source=connection.source,
        api=connection.api,
        text_family=connection.family == "text",
    )


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("text")
        )
    return ""


def validate_task_messages(messages: Any) -> list[Message]:
    """Shallow copies of the task messages, or ``invalid_input`` naming the bad one."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise GenerateTaskError(
            "invalid_input", "task_messages must be a list", details={"field": "task_messages"}
        )
    out: list[Message] = []
    for index, message in enumerate(messages):
        where = f"task_messages[{index}]"
        if not isinstance(message, Mapping):
            raise GenerateTaskError(
                "invalid_input", f"{where} must be an object", details={"field": where}
            )
        if message.get("role") not in _ROLES:
            raise GenerateTaskError(
                "invalid_input",
                f"{where}.role must be one of {', '.join(_ROLES)}",
                details={"field": f"{where}.role"},
            )
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise GenerateTaskError(
                "invalid_input",
                f"{where}.content must be a string or a list of parts",
                details={"field": f"{where}.content"},
            )
        copy = dict(message)
        if message.get("tool_calls"):
            copy["tool_calls"] = _openai_calls(message["tool_calls"], where)
        out.append(copy)
    return out


def _openai_calls(calls: Any, where: str) -> list[Any]:
    """An assistant message's tool calls in the OpenAI shape the envelope reads (a
    ``TaskResult``'s own ``ToolCall`` values may be passed back as they are)."""
    if not isinstance(calls, Sequence) or isinstance(calls, str | bytes):
        raise GenerateTaskError(
            "invalid_input",
            f"{where}.tool_calls must be a list",
            details={"field": f"{where}.tool_calls"},
        )
    out: list[Any] = []
    for index, call in enumerate(calls):
        if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
            out.append(call)
            continue
        try:
            parsed = coerce_tool_call(call, index)
        except Exception as exc:
            raise GenerateTaskError(
                "invalid_input",
                f"{where}.tool_calls[{index}] is not a tool call",
                cause=exc,
                details={"field": f"{where}.tool_calls[{index}]"},
            ) from exc
        out.append(parsed.to_openai() | {"id": parsed.id or f"call_{index}"})
    return out


def scan_task_world_info(
    state: ChatState,
    pstate: PromptState,
    messages: Sequence[Mapping[str, Any]] | None,
    *,
    trigger: str,
    substitute: MacroSubstitute,
    rng: random.Random,
    compat: str,
    card: CardFields | None = None,
) -> WorldInfoResult:
    """A dry-run scan of ``state``'s books against ``messages`` (task-shaped dicts), or the
    chat itself when ``messages`` is ``None``. Sticky and cooldown never advance. ``card``:
    the card fields the build that follows will use (evaluated once, shared). The scan is the
    prompt pipeline's (:func:`tavernkit.prompt.wi_scan.scan_world_info`) over the task's
    texts, with the budget of the preset (SillyTavern's defaults when there is none)."""
    if not state.books:
        return WorldInfoResult()
    wi_settings = state.settings.world_info
    texts: Sequence[str] | None
    if messages is None and trigger != "swipe":
        # the chat as a turn's scan reads it: over a window, only the newest messages are
        # read (a deeper scan raises OutsideWindow and the caller loads more)
        texts = None
    elif messages is None:
        texts = scan_chat(
            state.messages,
            include_names=wi_settings.include_names,
            substitute=substitute,
            trigger=trigger,
        )
    else:
        names = {"user": pstate.user, "assistant": pstate.char or "Assistant"}
        rows = [
            {
                "name": names.get(str(m.get("role")), "System"),
                "mes": _content_text(m.get("content")),
                "is_system": False,
            }
            for m in messages
            if _content_text(m.get("content"))
        ]
        texts = scan_chat(rows, include_names=wi_settings.include_names, trigger=trigger)
    return scan_world_info(
        pstate.replace(preset=pstate.preset or ChatCompletionPreset()),
        [(b.name, b.book, b.scope) for b in state.books],
        wi_settings,
        substitute,
        kind=trigger,
        is_chat=True,
        character_filename=state.character_filename,
        rng=rng.random,
        compat=compat,
        dry_run=True,
        card=card,
        texts=texts,
    )


def make_substitute(
    pstate: PromptState,
    wi: WorldInfoResult | None,
    compat: str,
    state: ChatState | None = None,
    renderer: PromptRenderer | None = None,
) -> MacroSubstitute:
    """The build's one macro evaluator (world-info outlets bound when there is a result).
    With ``state``, ``{{getvar}}`` and friends read copies of the chat's and the owner's
    variables (a task never writes them). With ``renderer`` (the Tavern's) every macro goes
    through it, so its providers and the plugins' macros work in tasks as in chat turns."""
    if state is None:
        return macro_substitute(
            pstate, outlets=worldinfo_outlets(wi), compat=compat, renderer=renderer
        )
    substitute = state_substitute(state, pstate, compat=compat, renderer=renderer)
    if wi is not None:
        substitute.env.outlets = worldinfo_outlets(wi)
    return substitute


def substitute_task_messages(
    messages: Sequence[Message],
    substitute: MacroSubstitute,
    compat: str,
    renderer: PromptRenderer | None = None,
) -> list[Message]:
    """Macros in the task messages' text, side effects (``{{setvar}}``...) stripped so a
    task never writes chat variables; through ``renderer`` when given."""
    if renderer is not None:
        evaluate: Callable[[str], str] = renderer.substitute_for(
            substitute.env,
            compat=compat,  # type: ignore[arg-type]
            skip_side_effects=True,
        )
    else:

        def evaluate(text: str) -> str:
            return substitute_macros(text, substitute.env, skip_side_effects=True, compat=compat)

    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and content:
            message = {**message, "content": evaluate(content)}
        elif isinstance(content, list):
            parts = []
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    part = {**part, "text": evaluate(part["text"])}
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out


def build_envelope(
    pstate: PromptState,
    wi: WorldInfoResult | None,
    task_messages: Sequence[Message],
    *,
    include_character_card: bool,
    substitute: MacroSubstitute,
    compat: str,
) -> list[Message]:
    """The preset-aware prompt around the task messages, as OpenAI-shaped dicts. The task
    messages were evaluated once already (side effects stripped) or must reach the model
    literally, so the build leaves them alone."""
    try:
        prompt = build_task_envelope(
            pstate,
            wi,
            task_messages,
            include_character_card=include_character_card,
            kind="quiet",
            substitute=substitute,
            compat=compat,
            literal_task_messages=True,
        )
    except TokenBudgetExceeded as exc:
        raise GenerateTaskError(
            "context_budget",
            str(exc),
            cause=exc,
            details={
                "identifier": exc.identifier,
                "needed": exc.needed,
                "available": exc.available,
            },
        ) from exc
    except FormatError as exc:
        raise GenerateTaskError(
            "invalid_input", str(exc), cause=exc, details={"field": exc.field}
        ) from exc
    return [_restore_parts(m, task_messages) for m in prompt.messages]


def _restore_parts(message: Message, task_messages: Sequence[Message]) -> Message:
    # The envelope carries task messages as text; a task message with image parts gets its
    # parts back so multimodal tasks reach the model whole.
    if not isinstance(message.get("content"), str):
        return message
    for task in task_messages:
        parts = task.get("content")
        if (
            isinstance(parts, list)
            and task.get("role") == message.get("role")
            and any(isinstance(p, Mapping) and p.get("type") == "image_url" for p in parts)
            and _content_text(parts) == message["content"]
        ):
            return {**message, "content": [dict(p) for p in parts if isinstance(p, Mapping)]}
    return message


def has_tool_history(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def to_provider_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[ChatMessage, ...]:
    """OpenAI-shaped message dicts as provider messages (tool calls, results, names, images
    and reasoning kept), through the prompt engine's own conversion."""
    try:
        return tuple(message_from_dict(m, where=f"messages[{i}]") for i, m in enumerate(messages))
    except FormatError as exc:
        raise GenerateTaskError(
            "invalid_input", str(exc), cause=exc, details={"field": exc.field}
        ) from exc


def fold_messages(
    messages: Sequence[Mapping[str, Any]], pstate: PromptState, substitute: MacroSubstitute
) -> tuple[str, list[str]]:
    """Messages folded into one text-completion prompt and its stop strings: the instruct
    template's sequences when instruct mode is on, else ``Name: text`` lines, ending with the
    opening of the reply. Earlier tool calls and results are written as text first."""
    if has_tool_history(messages):
        messages = XmlProtocol(_HISTORY_TRIGGER).rewrite_history(messages)
    user, char = pstate.user, pstate.char or "Assistant"
    names = InstructNames(user=user, char=char)
    if pstate.instruct_enabled:
        instruct = pstate.instruct or InstructTemplate()
        pieces = [
            format_instruct_chat(
                instruct,
                substitute,
                names,
                name=user if m.get("role") == "user" else char,
                text=_content_text(m.get("content")),
                is_user=m.get("role") in ("user", "tool"),
                is_narrator=m.get("role") == "system",
            )
            for m in messages
        ]
        prompt = "".join(pieces) + format_instruct_prompt(
            instruct, substitute, names, name=char, is_quiet=True
        )
        return prompt, instruct_stop_sequences(instruct, substitute, names)
    lines = []
    for m in messages:
        text = _content_text(m.get("content"))
        role = m.get("role")
        if role == "system":
            lines.append(text)
        elif role == "assistant":
            lines.append(f"{char}: {text}")
        else:
            lines.append(f"{user}: {text}")
    return "\n".join(lines) + f"\n{char}:", [f"\n{user}:"]
