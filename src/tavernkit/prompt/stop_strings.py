"""Stop strings of a text-completion request (SillyTavern's ``getStoppingStrings``)."""

from __future__ import annotations

import json

from tavernkit.models.templates import ContextTemplate, InstructTemplate
from tavernkit.prompt.instruct import InstructNames, instruct_stop_sequences
from tavernkit.prompt.state import PromptState, Substitute

__all__ = ["stop_strings"]


def stop_strings(
    state: PromptState,
    context: ContextTemplate,
    instruct: InstructTemplate | None,
    sub: Substitute,
    names: InstructNames,
    kind: str,
) -> list[str]:
    """``getStoppingStrings``: speaker names, instruct sequences, context separators, custom.

    The names come first: the other side's prefix (the user's, or the character's when
    impersonating), then always the user's own (so an impersonation stops at both
    participants' prefixes, character first), then the character's for a continue of a user
    message; duplicates keep their first place."""
    out: list[str] = []
    if context.names_as_stop_strings:
        char_line, user_line = f"\n{names.char}:", f"\n{names.user}:"
        out.append(char_line if kind == "impersonate" else user_line)
        out.append(user_line)
        if kind == "continue" and state.messages and state.messages[-1].is_user:
            out.append(char_line)
        if names.in_group and (names.char or kind == "impersonate"):
            # Every other member (every member when impersonating) ends the reply too.
            out.extend(
                f"\n{member}:"
                for member in names.members
                if member != names.char or kind == "impersonate"
            )
    if instruct is not None:
        out.extend(instruct_stop_sequences(instruct, sub, names))
    if context.use_stop_strings:
        lines: list[str] = []
        for line in f"{context.chat_start or ''}\n{context.example_separator or ''}".split("\n"):
            if line and line.strip() and line not in lines:
                lines.append(line)
        out.extend(sub("\n" + line) for line in lines)
    out.extend(_custom_stop_strings(state, sub))
    if state.settings.single_line:
        out.insert(0, "\n")
    unique: list[str] = []
    for s in out:
        if s not in unique:
            unique.append(s)
    return unique


def _custom_stop_strings(state: PromptState, sub: Substitute) -> list[str]:
    raw = state.settings.custom_stopping_strings
    if not raw:
        return []
    try:
        values = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(values, list):
        return []
    strings = [v for v in values if isinstance(v, str) and v]
    if state.settings.custom_stopping_strings_macro:
        strings = [sub(v) for v in strings]
    return strings
