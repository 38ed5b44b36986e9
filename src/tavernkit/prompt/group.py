"""What a group turn adds to a prompt build: the members around the drafted speaker.

A group turn is built like a solo one with :attr:`PromptState.character` set to the drafted
member and :attr:`PromptState.group` set to a :class:`GroupPromptContext`. The builders read it
for the group-only parts (SillyTavern 1.18, behaviour reference §1.6-§1.7): ``Name: ``
prefixes on other speakers' messages, the group nudge, the new-group-chat marker, other
members as example speakers and stop strings, the ``{{group}}`` family of macros, and in join
mode every member's card fields and depth prompt.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tavernkit.models.character import Character
from tavernkit.models.group_context import GroupPromptContext, PromptMember
from tavernkit.prompt.macros import MacroSubstitute, group_macro_values
from tavernkit.prompt.state import Substitute

__all__ = [
    "GroupPromptContext",
    "JoinedDepthPrompt",
    "PromptMember",
    "join_field",
    "joined_depth_prompts",
    "member_substitute",
]


def member_substitute(
    substitute: Substitute, name: str, context: GroupPromptContext | None = None
) -> Substitute:
    """``substitute`` with ``{{char}}`` (and ``{{notChar}}``) as member ``name``: join mode
    resolves each member's fields as that member. Evaluators other than the macro engine's
    get ``char`` as a per-call macro."""
    if isinstance(substitute, MacroSubstitute):
        env = dataclasses.replace(substitute.env, char=name)
        if context is not None:
            env.not_char = group_macro_values(context, name)["not_char"]
        return MacroSubstitute(env, compat=substitute.compat)

    def as_member(
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str:
        return substitute(text, original=original, dynamic={**(dynamic or {}), "char": name})

    return as_member


_FIELDNAME = re.compile(r"<FIELDNAME>", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class JoinedDepthPrompt:
    """One member's depth prompt in join mode (``DEPTH_PROMPT_<i>``)."""

    text: str
    depth: int
    role: str


def join_field(
    context: GroupPromptContext,
    label: str,
    value_of: Callable[[Character], str],
    prepare: Callable[[str, Substitute], str],
    substitute: Substitute,
    *,
    examples: bool = False,
) -> str:
    """One card field joined over the members (``getGroupCharacterCardsLazy``).

    Per member: the value trimmed (an empty one skips the member, prefix and suffix too),
    ``<START>\\n`` put before examples that lack it, ``<FIELDNAME>`` replaced with ``label``
    in the value, prefix and suffix, then each evaluated with ``{{char}}`` as that member
    (``prepare`` is ``baseChatReplace``); the parts are joined with ``\\n``.
    """
    parts: list[str] = []
    for member in context.joined_members():
        value = value_of(member.character).strip()
        if not value:
            continue
        if examples and not value.startswith("<START>"):
            value = "<START>\n" + value
        sub = member_substitute(substitute, member.name, context)
        value = _FIELDNAME.sub(label, value).strip()
        prefix = _FIELDNAME.sub(label, context.join_prefix)
        suffix = _FIELDNAME.sub(label, context.join_suffix)
        parts.append(prepare(prefix, sub) + prepare(value, sub) + prepare(suffix, sub))
    return "\n".join(parts)


def joined_depth_prompts(
    context: GroupPromptContext,
    prepare: Callable[[str, Substitute], str],
    substitute: Substitute,
) -> tuple[JoinedDepthPrompt, ...]:
    """Every (unmuted or drafted) member's depth prompt, each evaluated as that member."""
    out: list[JoinedDepthPrompt] = []
    for member in context.depth_members():
        depth = member.character.depth_prompt
        if depth is None or not depth.prompt.strip():
            continue
        text = prepare(depth.prompt.strip(), member_substitute(substitute, member.name, context))
        out.append(JoinedDepthPrompt(text, depth.depth, depth.role))
    return tuple(out)
