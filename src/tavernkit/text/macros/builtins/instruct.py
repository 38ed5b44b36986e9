"""Instruct-template and system-prompt macros (empty when instruct mode / sysprompt is off)."""

from __future__ import annotations

from collections.abc import Callable

from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.registry import MacroRegistry

__all__ = ["register"]


def _seq(field: str, fallback: str | None = None) -> Callable[[MacroEnv], str]:
    def get(env: MacroEnv) -> str:
        instruct = env.instruct
        if not env.instruct_enabled or not instruct:
            return ""
        value = instruct.get(field) or (instruct.get(fallback) if fallback else "")
        return str(value or "")

    return get


def _default_system_prompt(env: MacroEnv) -> str:
    return env.system_prompt if env.sysprompt_enabled else ""


def _system_prompt(env: MacroEnv) -> str:
    if env.prefer_character_prompt and env.char_prompt:
        return env.char_prompt
    return _default_system_prompt(env)


_TABLE: dict[str, tuple[Callable[[MacroEnv], str], tuple[str, ...]]] = {
    "instructStoryStringPrefix": (_seq("story_string_prefix"), ()),
    "instructStoryStringSuffix": (_seq("story_string_suffix"), ()),
    "instructUserPrefix": (_seq("input_sequence"), ("instructInput",)),
    "instructUserSuffix": (_seq("input_suffix"), ()),
    "instructAssistantPrefix": (_seq("output_sequence"), ("instructOutput",)),
    "instructAssistantSuffix": (_seq("output_suffix"), ("instructSeparator",)),
    "instructSystemPrefix": (_seq("system_sequence"), ()),
    "instructSystemSuffix": (_seq("system_suffix"), ()),
    "instructFirstAssistantPrefix": (
        _seq("first_output_sequence", "output_sequence"),
        ("instructFirstOutputPrefix",),
    ),
    "instructLastAssistantPrefix": (
        _seq("last_output_sequence", "output_sequence"),
        ("instructLastOutputPrefix",),
    ),
    "instructStop": (_seq("stop_sequence"), ()),
    "instructUserFiller": (_seq("user_alignment_message"), ()),
    "instructSystemInstructionPrefix": (_seq("last_system_sequence"), ()),
    "instructFirstUserPrefix": (
        _seq("first_input_sequence", "input_sequence"),
        ("instructFirstInput",),
    ),
    "instructLastUserPrefix": (
        _seq("last_input_sequence", "input_sequence"),
        ("instructLastInput",),
    ),
    "defaultSystemPrompt": (_default_system_prompt, ("instructSystem", "instructSystemPrompt")),
    "systemPrompt": (_system_prompt, ()),
    "exampleSeparator": (lambda e: e.example_separator, ("chatSeparator",)),
    "chatStart": (lambda e: e.chat_start, ()),
}


def register(registry: MacroRegistry) -> None:
    for name, (fn, aliases) in _TABLE.items():
        registry.register_value(
            name, fn, aliases=aliases, category="prompts", description=f"Instruct value {name}."
        )
