"""The story string and the example blocks of a text-completion build
(:mod:`tavernkit.prompt.text_completion`): ``renderStoryString`` in the instruct wrapper, the
system prompt and post-history instructions, the example blocks with world info's example
entries, and the story string's parameters."""

from __future__ import annotations

import re

from tavernkit.jscompat import js_trim
from tavernkit.models.persona import PersonaPosition
from tavernkit.models.templates import ContextTemplate, InstructTemplate
from tavernkit.prompt.card import CardFields, base_chat_replace
from tavernkit.prompt.examples import parse_mes_examples
from tavernkit.prompt.extensions import extension_prompt_text
from tavernkit.prompt.instruct import format_instruct_examples, format_instruct_story_string
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, PromptState, Substitute
from tavernkit.prompt.story_string import render_story_string
from tavernkit.prompt.text_frame import TextFrame
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = ["STORY_STRING_KEY", "example_blocks", "render_story", "story_params", "system_texts"]

STORY_STRING_KEY = "__STORY_STRING__"
_TRIM_AROUND = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*")


def render_story(
    state: PromptState,
    context: ContextTemplate,
    instruct: InstructTemplate | None,
    params: dict[str, str],
    sub: Substitute,
) -> str:
    """``renderStoryString`` (+ the instruct wrapper when the story string is in the prompt)."""
    output = render_story_string(context.story_string, params, sub)
    output = sub(output)
    output = _TRIM_AROUND.sub("", output)  # an evaluator without {{trim}} still drops it
    output = output.lstrip("\n")
    in_chat = context.story_string_position == ExtensionPosition.IN_CHAT
    keep_bare = instruct is not None and (not instruct.wrap or bool(instruct.story_string_suffix))
    if output and not output.endswith("\n") and not in_chat and not keep_bare:
        output += "\n"
    if instruct is not None and not in_chat:
        output = format_instruct_story_string(output, instruct, sub)
    return output


def system_texts(
    state: PromptState, fields_system: str, fields_jailbreak: str, sub: Substitute
) -> tuple[str, str]:
    sysprompt = state.sysprompt
    if not state.sysprompt_enabled or sysprompt is None:
        return "", ""
    preset_system = sub(sysprompt.content) if sysprompt.content else ""
    preset_phi = sub(sysprompt.post_history) if sysprompt.post_history else ""
    system = (
        sub(fields_system, original=preset_system)
        if state.settings.prefer_character_prompt and fields_system
        else preset_system
    )
    jailbreak = (
        sub(fields_jailbreak, original=preset_phi)
        if state.settings.prefer_character_jailbreak and fields_jailbreak
        else preset_phi
    )
    return system, jailbreak


def example_blocks(
    build: TextFrame, wi: WorldInfoResult | None, fields: CardFields
) -> tuple[list[str], list[str]]:
    """The example blocks, world info's example entries before (position 0) or after them,
    formatted for instruct mode; also the blocks as parsed (``mesExamplesRaw``)."""
    state, sub, context = build.state, build.sub, build.context
    heading = (
        "<START>\n"
        if build.is_instruct
        else (f"{sub(context.example_separator)}\n" if context.example_separator else "")
    )
    examples = parse_mes_examples(fields.mes_examples, heading=heading)
    for wi_example in wi.examples if wi is not None else ():
        if not wi_example.content:
            continue
        parsed = parse_mes_examples(
            base_chat_replace(wi_example.content, state, sub), heading=heading
        )
        if wi_example.position == 0:
            examples[0:0] = parsed
        else:
            examples.extend(parsed)
    raw_examples = list(examples)
    if build.is_instruct:
        examples = format_instruct_examples(
            build.instruct,
            sub,
            build.names,
            examples,
            example_separator=context.example_separator,
        )
    return examples, raw_examples


def story_params(
    build: TextFrame,
    wi: WorldInfoResult | None,
    fields: CardFields,
    system: str,
    extension_prompts: dict[str, ExtensionPrompt],
    before_anchor: str,
) -> dict[str, str]:
    """The story string's parameters but the examples (``mesExamples``, added by the
    caller): the card, world info before/after, the extension anchors."""
    state = build.state
    after_anchor = extension_prompt_text(
        extension_prompts, build.sub, position=ExtensionPosition.IN_PROMPT
    )
    wi_before = wi.before if wi is not None else ""
    wi_after = wi.after if wi is not None else ""
    return {
        "description": fields.description,
        "personality": fields.personality,
        "persona": fields.persona if state.persona_position == PersonaPosition.IN_PROMPT else "",
        "scenario": fields.scenario,
        "system": system,
        "char": state.char,
        "user": state.user,
        "wiBefore": wi_before,
        "wiAfter": wi_after,
        "loreBefore": wi_before,
        "loreAfter": wi_after,
        "anchorBefore": js_trim(before_anchor),
        "anchorAfter": js_trim(after_anchor),
    }
