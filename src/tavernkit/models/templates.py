"""The text-completion templates and the reasoning template of SillyTavern.

``presets/instruct``, ``presets/context``, ``presets/sysprompt`` and ``presets/reasoning`` hold one
JSON object per template. Defaults are SillyTavern's ``power_user`` defaults, so a template
missing a key behaves as SillyTavern behaves with the setting untouched. Files are open (unknown
keys kept in place) and scalars are validated strictly so a round trip never changes a value.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import ConfigDict

from tavernkit.models.base import WireModel

__all__ = [
    "DEFAULT_STORY_STRING",
    "ContextTemplate",
    "InstructTemplate",
    "NamesBehavior",
    "ReasoningTemplate",
    "SystemPrompt",
    "builtin_reasoning_template",
    "migrate_legacy_instruct",
]

_STRICT = ConfigDict(strict=True)

#: When speaker names go into instruct-formatted messages: never, in groups and for forced
#: avatars only, or always.
NamesBehavior = Literal["none", "force", "always"]

#: ``power_user.context.story_string`` (the Default template adds anchors, WI and ``{{trim}}``).
DEFAULT_STORY_STRING: Final = (
    "{{#if system}}{{system}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}"
)


class InstructTemplate(WireModel):
    """How messages are wrapped for a text-completion model (``presets/instruct/*.json``)."""

    model_config = _STRICT

    input_sequence: str = "### Instruction:"
    input_suffix: str = ""
    output_sequence: str = "### Response:"
    output_suffix: str = ""
    system_sequence: str = ""
    system_suffix: str = ""
    last_system_sequence: str = ""
    first_input_sequence: str = ""
    last_input_sequence: str = ""
    first_output_sequence: str = ""
    last_output_sequence: str = ""
    story_string_prefix: str = ""
    story_string_suffix: str = ""
    stop_sequence: str = ""
    #: Join prefix, message and suffix with newlines.
    wrap: bool = True
    #: Substitute macros inside the sequences (``{{name}}`` is the speaker).
    macro: bool = True
    names_behavior: NamesBehavior = "force"
    #: Switch to this template when the connected model's name matches.
    activation_regex: str = ""
    skip_examples: bool = False
    system_same_as_user: bool = False
    sequences_as_stop_strings: bool = True
    user_alignment_message: str = ""
    name: str = ""
    # Present in settings.json's ``power_user.instruct``, not in template files.
    enabled: bool | None = None
    preset: str | None = None
    bind_to_context: bool | None = None


class ContextTemplate(WireModel):
    """The story string and chat separators (``presets/context/*.json``)."""

    model_config = _STRICT

    story_string: str = DEFAULT_STORY_STRING
    example_separator: str = "***"
    chat_start: str = "***"
    use_stop_strings: bool = True
    names_as_stop_strings: bool = True
    #: 0 in the prompt, 1 in the chat (at ``story_string_depth``), 2 before the prompt.
    story_string_position: int = 0
    story_string_depth: int = 1
    #: 0 system, 1 user, 2 assistant (used when the position is in-chat).
    story_string_role: int = 0
    always_force_name2: bool = True
    trim_sentences: bool = False
    single_line: bool = False
    name: str = ""
    # Present in settings.json's ``power_user.context``, not in template files.
    preset: str | None = None


class SystemPrompt(WireModel):
    """A system prompt preset (``presets/sysprompt/*.json``)."""

    model_config = _STRICT

    name: str = "Neutral - Chat"
    content: str = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
    #: Post-history instructions sent after the chat (the card's own take precedence).
    post_history: str = ""
    # Present in settings.json's ``power_user.sysprompt``, not in template files.
    enabled: bool | None = None


class ReasoningTemplate(WireModel):
    """How a model's reasoning is delimited (``presets/reasoning/*.json``)."""

    model_config = _STRICT

    name: str = "Think XML"
    prefix: str = "<think>"
    suffix: str = "</think>"
    #: Put between the reasoning block and the reply when reasoning is added back to prompts.
    separator: str = "\n"


#: The reasoning templates SillyTavern 1.18 ships (``default/content/presets/reasoning``),
#: which every fresh SillyTavern install has: the settings' ``reasoning.template`` names one of
#: them until the user imports their own, so "Parse reasoning" works with nothing imported.
#: ``(prefix, suffix, separator)`` by name; ``"Think XML"`` is the selected default.
_BUILTIN_REASONING: Final[Mapping[str, tuple[str, str, str]]] = {
    "Blank": ("", "", ""),
    "DeepSeek": ("<think>\n", "\n</think>", "\n\n"),
    "Gemma 4": ("<|channel>thought\n", "<channel|>", "\n\n"),
    "OpenAI Harmony": (
        "<|start|>assistant<|channel|>analysis<|message|>",
        "<|start|>assistant<|channel|>final<|message|>",
        "",
    ),
    "Think XML": ("<think>", "</think>", "\n"),
}


def builtin_reasoning_template(name: str) -> ReasoningTemplate | None:
    """SillyTavern's shipped reasoning template called ``name`` (exactly, as SillyTavern
    selects it), a new value each call; ``None`` for any other name. A stored template of the
    same name is the user's and wins: callers look here only when none is stored."""
    found = _BUILTIN_REASONING.get(name)
    if found is None:
        return None
    prefix, suffix, separator = found
    return ReasoningTemplate.create(name=name, prefix=prefix, suffix=suffix, separator=separator)


#: Keys of old instruct templates that SillyTavern drops after migrating them.
_OBSOLETE_INSTRUCT_KEYS: Final = (
    "names",
    "names_force_groups",
    "system_sequence_prefix",
    "system_sequence_suffix",
)

#: Keys SillyTavern fills in (with these values) when it migrates an old instruct template.
_INSTRUCT_MIGRATION_DEFAULTS: Final[Mapping[str, Any]] = {
    "input_suffix": "",
    "system_sequence": "",
    "system_suffix": "",
    "user_alignment_message": "",
    "last_system_sequence": "",
    "first_input_sequence": "",
    "last_input_sequence": "",
    "skip_examples": False,
    "system_same_as_user": False,
    "names_behavior": "force",
    "sequences_as_stop_strings": True,
    "story_string_prefix": "",
    "story_string_suffix": "",
}


def migrate_legacy_instruct(data: Mapping[str, Any]) -> dict[str, Any]:
    """Bring an old instruct template to the current shape, as SillyTavern does on load.

    - ``separator_sequence`` becomes ``output_suffix`` (an empty or null one gives ``""``), in
      the same place in the key order;
    - ``names`` / ``names_force_groups`` become ``names_behavior``: ``"always"`` when ``names``,
      else ``"force"`` when ``names_force_groups``, else ``"none"``;
    - the obsolete keys (``names``, ``names_force_groups``, ``system_sequence_prefix``,
      ``system_sequence_suffix``) are removed, and the keys newer versions added are filled
      with SillyTavern's migration defaults.

    A template with none of the legacy keys comes back equal, in the same key order (so a current
    file round-trips untouched). Returns a new mapping; ``data`` is not changed.
    """
    src = dict(data)
    if not any(key in src for key in ("separator_sequence", *_OBSOLETE_INSTRUCT_KEYS)):
        return copy.deepcopy(src)

    out: dict[str, Any] = {}
    for key, value in src.items():
        if key == "separator_sequence":
            out["output_suffix"] = value or ""
        elif key == "output_suffix" and "separator_sequence" in src:
            continue  # the legacy key wins, as in SillyTavern
        elif key not in _OBSOLETE_INSTRUCT_KEYS:
            out[key] = copy.deepcopy(value)

    if src.get("names") is not None:
        if src["names"]:
            out["names_behavior"] = "always"
        elif src.get("names_force_groups"):
            out["names_behavior"] = "force"
        else:
            out["names_behavior"] = "none"

    for key, default in _INSTRUCT_MIGRATION_DEFAULTS.items():
        if key not in out:
            out[key] = default
    return out
