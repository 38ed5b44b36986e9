"""The character-card fields as prompts see them (SillyTavern's ``getCharacterCardFields``).

Every field is trimmed and goes through ``baseChatReplace`` (macros, then ``collapse_newlines``
when on, then ``\\r`` removed). Chat metadata overrides the scenario, the example dialogue and
the system prompt per chat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tavernkit.prompt.group import JoinedDepthPrompt, join_field, joined_depth_prompts
from tavernkit.prompt.state import PromptState, Substitute

__all__ = ["CardFields", "base_chat_replace", "card_fields", "collapse_newlines"]

_NEWLINES = re.compile(r"\n+")


def collapse_newlines(text: str) -> str:
    return _NEWLINES.sub("\n", text)


def base_chat_replace(text: str | None, state: PromptState, substitute: Substitute) -> str:
    if not text:
        return ""
    out = substitute(text)
    if state.settings.collapse_newlines:
        out = collapse_newlines(out)
    return out.replace("\r", "")


@dataclass(frozen=True, slots=True)
class CardFields:
    description: str
    personality: str
    scenario: str
    mes_examples: str
    persona: str
    system: str
    jailbreak: str
    depth_prompt: str
    creator_notes: str
    #: Join mode of a group turn: every member's depth prompt (``DEPTH_PROMPT_<i>``), which
    #: replace ``depth_prompt``; ``None`` otherwise.
    group_depth_prompts: tuple[JoinedDepthPrompt, ...] | None = None


def card_fields(state: PromptState, substitute: Substitute) -> CardFields:
    char = state.character
    meta = state.chat_metadata
    scenario = (meta.scenario if meta and meta.scenario else None) or char.scenario or ""
    examples = (meta.mes_example if meta and meta.mes_example else None) or char.mes_example or ""
    system = (
        (meta.system_prompt if meta and meta.system_prompt else None) or char.system_prompt or ""
    )
    settings = state.settings
    depth = char.depth_prompt
    description = base_chat_replace(char.description.strip(), state, substitute)
    personality = base_chat_replace(char.personality.strip(), state, substitute)
    scenario_text = base_chat_replace(scenario.strip(), state, substitute)
    examples_text = base_chat_replace(examples.strip(), state, substitute)
    group_depth: tuple[JoinedDepthPrompt, ...] | None = None
    group = state.group
    if group is not None and group.join:
        # Join mode: each field over the members; a chat override still replaces the join.
        def prepare(text: str, sub: Substitute) -> str:
            return base_chat_replace(text, state, sub)

        description = join_field(group, "Description", lambda c: c.description, prepare, substitute)
        personality = join_field(group, "Personality", lambda c: c.personality, prepare, substitute)
        if not (meta and meta.scenario and meta.scenario.strip()):
            scenario_text = join_field(group, "Scenario", lambda c: c.scenario, prepare, substitute)
        if not (meta and meta.mes_example and meta.mes_example.strip()):
            examples_text = join_field(
                group,
                "Example Messages",
                lambda c: c.mes_example,
                prepare,
                substitute,
                examples=True,
            )
        group_depth = joined_depth_prompts(group, prepare, substitute)
    return CardFields(
        description=description,
        personality=personality,
        scenario=scenario_text,
        mes_examples=examples_text,
        persona=base_chat_replace(state.persona_description.strip(), state, substitute),
        system=(
            _keep_original(system.strip(), state, substitute)
            if settings.prefer_character_prompt
            else ""
        ),
        jailbreak=(
            _keep_original((char.post_history_instructions or "").strip(), state, substitute)
            if settings.prefer_character_jailbreak
            else ""
        ),
        depth_prompt=base_chat_replace(depth.prompt.strip() if depth else "", state, substitute),
        creator_notes=base_chat_replace((char.creator_notes or "").strip(), state, substitute),
        group_depth_prompts=group_depth,
    )


_ORIGINAL = "{{original}}"
_PLACEHOLDER = "\ue000tk-original\ue000"


def _keep_original(text: str, state: PromptState, substitute: Substitute) -> str:
    """``baseChatReplace`` of a card prompt override, leaving ``{{original}}`` for later.

    SillyTavern's first pass has no original text: the macro fails and stays literal, and the
    prompt builder expands it once the preset's prompt is known. A placeholder keeps it intact
    whatever the evaluator does with an unknown ``{{original}}``.
    """
    if _ORIGINAL not in text:
        return base_chat_replace(text, state, substitute)
    protected = text.replace(_ORIGINAL, _PLACEHOLDER)
    return base_chat_replace(protected, state, substitute).replace(_PLACEHOLDER, _ORIGINAL)
