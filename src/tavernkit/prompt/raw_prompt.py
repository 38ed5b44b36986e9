"""A raw generation's text-completion prompt (SillyTavern 1.18's ``createRawPrompt`` for a
text API, given one prompt string): what ``generateRaw`` sends, and so what Summarize's Raw
builders send on a text-completion API.

No card, no world info, no chat: the system prompt (wrapped as the instruct story string
when instruct mode is on), the prompt as one user message (instruct: the input sequence;
otherwise ``"<persona>: "`` before it), then the last line (instruct: the quiet system
sequence, or the output sequence with ``quiet_to_loud``; otherwise a newline) and the
prefill. The stop strings are a normal generation's (``getStoppingStrings``: ``generateRaw``
asks the text backend with them). Chat completion needs none of this: its raw prompt is the
messages themselves.

The prompt, system prompt and prefill are taken as given: their macros are resolved by the
caller, once (as for the chat-completion messages of ``generate_raw``); ``sub`` resolves the
instruct sequences' macros.

SillyTavern runs NovelAI's prompt through ``adjustNovelInstructionPrompt`` as well; tavernkit
sends NovelAI the prompt as it is.
"""

from __future__ import annotations

from tavernkit.models.templates import ContextTemplate, InstructTemplate
from tavernkit.prompt.assembled import AssembledText
from tavernkit.prompt.instruct import (
    InstructNames,
    format_instruct_chat,
    format_instruct_prompt,
    format_instruct_story_string,
)
from tavernkit.prompt.state import ExtensionPosition, PromptState, Substitute
from tavernkit.prompt.stop_strings import stop_strings

__all__ = ["raw_text_prompt"]


def _system(
    system_prompt: str, instruct: InstructTemplate | None, context: ContextTemplate, sub: Substitute
) -> str:
    text = system_prompt
    if instruct is None:
        return text.strip()
    # formatInstructModeStoryString: no sequences around an empty one, nor in-chat
    if text and context.story_string_position != ExtensionPosition.IN_CHAT:
        text = format_instruct_story_string(text, instruct, sub)
    if text and not text.endswith("\n") and instruct.wrap and not instruct.story_string_suffix:
        text += "\n"
    return text


def raw_text_prompt(
    state: PromptState,
    prompt: str,
    sub: Substitute,
    *,
    system_prompt: str = "",
    prefill: str = "",
    instruct_override: bool = False,
    quiet_to_loud: bool = False,
) -> AssembledText:
    """``createRawPrompt(prompt, api, instructOverride, quietToLoud, systemPrompt, prefill)``
    for a text API, with ``state``'s instruct and context templates and names."""
    context = state.context if state.context is not None else ContextTemplate()
    template = state.instruct if state.instruct is not None else InstructTemplate()
    instruct = template if state.instruct_enabled and not instruct_override else None
    names = InstructNames(
        user=state.user,
        char=state.char,
        in_group=state.group is not None,
        members=tuple(state.group.names) if state.group is not None else (),
    )
    text = prompt.strip()
    if instruct is not None:
        message = format_instruct_chat(
            instruct, sub, names, name=names.user, text=text, is_user=True, is_narrator=False
        )
    else:
        message = f"{names.user}: {text}" if names.user else text
    parts = [_system(system_prompt, instruct, context, sub)] if system_prompt else []
    parts.append(message)
    bias = prefill
    if instruct is not None:
        last = format_instruct_prompt(
            instruct,
            sub,
            names,
            name=names.char,
            prompt_bias=bias,
            is_quiet=True,
            quiet_to_loud=quiet_to_loud,
        )
        body = "".join(parts) + last
    else:
        body = "\n".join(parts) + f"\n{bias}"
    stop = stop_strings(state, context, instruct, sub, names, "quiet")
    return AssembledText(prompt=body, stop=stop, kind="quiet")
