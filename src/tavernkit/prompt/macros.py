"""The bridge from a prompt build to the macro engine (one evaluator per build).

SillyTavern evaluates macros with an environment read from its globals at the moment of each
call; here the environment is built once from the :class:`PromptState` and shared by every
call of the build, so variables set by one prompt (``{{setvar}}``) are seen by the next.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tavernkit.models.group_context import GroupPromptContext
from tavernkit.prompt.state import PromptState, Substitute
from tavernkit.text.macros.env import env_from_chat_state
from tavernkit.text.macros.evaluator import substitute_macros
from tavernkit.text.variables import InMemoryVariables

if TYPE_CHECKING:
    from tavernkit.text.macros.env import MacroEnv
    from tavernkit.text.render import PromptRenderer

__all__ = [
    "MacroSubstitute",
    "bind_card_fields",
    "group_macro_values",
    "macro_substitute",
    "may_hold_macros",
]

# Characters without which a text cannot hold a macro (``{{x}}``), a legacy tag (``<USER>``) or
# an escape the engine would unescape; such texts skip the engine entirely.
_MACRO_CHARS = ("{", "<", "\\")


def may_hold_macros(text: str) -> bool:
    """Whether ``text`` has a character a macro, legacy tag or escape needs (see
    ``_MACRO_CHARS``); the engine leaves any other text as it is."""
    # Three substring tests beat a generator over _MACRO_CHARS on long chat messages.
    return bool(text) and ("{" in text or "<" in text or "\\" in text)


class MacroSubstitute:
    """A :class:`~tavernkit.prompt.state.Substitute` backed by the macro engine.

    With a ``renderer`` (``Tavern.prompt_renderer``) every evaluation goes through it, so the
    function and variable providers registered there work in every prompt, not only in direct
    ``render_template`` calls; the environment stays this object's ``env`` either way.
    """

    def __init__(
        self, env: MacroEnv, *, compat: str | None = None, renderer: PromptRenderer | None = None
    ) -> None:
        self.env = env
        self.compat = compat
        self._rendered = (
            renderer.substitute_for(env, compat=compat)  # type: ignore[arg-type]
            if renderer is not None
            else None
        )

    def __call__(
        self,
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str:
        if not may_hold_macros(text):
            return text
        if self._rendered is not None:
            return self._rendered(text, original=original, dynamic=dynamic)

        env = self.env
        if original is not None or dynamic:
            merged = {**(env.dynamic_macros or {}), **(dynamic or {})}
            env = dataclasses.replace(env, original=original, dynamic_macros=merged)
        return substitute_macros(text, env, compat=self.compat)


def macro_substitute(
    state: PromptState,
    *,
    outlets: Mapping[str, str] | None = None,
    compat: str = "default",
    renderer: PromptRenderer | None = None,
    **env_overrides: Any,
) -> MacroSubstitute:
    """An evaluator for ``state``: names, card and persona fields, chat statistics, outlets.

    The card fields in the environment are the raw card text; the builders substitute card
    fields themselves where SillyTavern does (``baseChatReplace``). ``env_overrides`` are
    passed to the environment (``clock=``, ``rng=``, ``variables=``, ``tz=``...).
    """

    values: dict[str, Any] = {
        "user": state.user,
        "char": state.char,
        "persona": state.persona_description,
        "model": state.model,
        "compat": compat,
    }
    if outlets:
        values["outlets"] = dict(outlets)
    if state.group is not None:
        values.update(group_macro_values(state.group, state.char))
    metadata = state.chat_metadata
    if metadata is not None:
        if isinstance(metadata.chat_id_hash, int):
            values["chat_id_hash"] = metadata.chat_id_hash
        if metadata.variables is not None and "variables" not in env_overrides:
            values["variables"] = InMemoryVariables(metadata.variables)
    messages = state.messages  # not copied: a turn's window is read from its newest end
    values["message_count"] = len(messages)
    values["last_message_id"] = len(messages) - 1 if messages else None
    values.update(env_overrides)
    env = env_from_chat_state({"character": state.character, "messages": _tail(messages)}, **values)
    return MacroSubstitute(env, compat=compat, renderer=renderer)


def group_macro_values(context: GroupPromptContext, speaker_name: str) -> dict[str, str]:
    """``{{group}}``/``{{charIfNotGroup}}`` (every member), ``{{groupNotMuted}}`` and
    ``{{notChar}}`` (the other unmuted members, no user), as 1.18's new macro engine has them."""
    return {
        "group": ", ".join(context.names),
        "group_not_muted": ", ".join(m.name for m in context.members if not m.muted),
        "not_char": ", ".join(
            m.name for m in context.members if not m.muted and m.name != speaker_name
        ),
    }


def _tail(messages: Sequence[Any]) -> Sequence[Any]:
    """The shortest tail holding the last visible user and character messages: all that the
    chat macros read besides the counts (a long chat need not be walked on every build)."""
    seen_user = seen_char = False
    for k in range(len(messages) - 1, -1, -1):
        message = messages[k]
        if message.is_system:
            continue
        if message.is_user:
            seen_user = True
        else:
            seen_char = True
        if seen_user and seen_char:
            return messages[k:]
    return messages


def bind_card_fields(substitute: Substitute, fields: Any) -> None:
    """Point ``{{description}}``, ``{{personality}}``... at the prepared card fields (trimmed,
    macros expanded), as SillyTavern's environment has them; a no-op for other evaluators."""
    if not isinstance(substitute, MacroSubstitute):
        return
    env = substitute.env
    env.description = fields.description
    env.personality = fields.personality
    env.scenario = fields.scenario
    env.persona = fields.persona
    env.mes_examples_raw = fields.mes_examples
    env.char_depth_prompt = fields.depth_prompt
    env.creator_notes = fields.creator_notes
