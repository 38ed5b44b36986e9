"""Regex scripts in a prompt build, where SillyTavern's ``Generate`` runs them.

- every chat message that goes into the prompt: USER_INPUT (the user's) or AI_OUTPUT (every
  other, narrator messages included) with ``isPrompt`` and its depth — the newest message of
  the prompt is depth 0, and on ``continue`` the continued message is depth -1;
- the reasoning added back to prompts: REASONING, ``isPrompt``, the message's depth;
- every activated world-info entry: WORLD_INFO, ``isPrompt``, the entry's depth for
  ``@depth`` entries and no depth otherwise (so the depth window does not apply).

Only ``promptOnly`` scripts can run on such calls (a plain script changed what was stored
already, a ``markdownOnly`` one only what is shown), so a build whose scripts have none skips
all of this (:func:`prompt_regex` is ``None``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tavernkit.models.chat import Message
from tavernkit.prompt.macros import MacroSubstitute
from tavernkit.prompt.reasoning import add_reasoning_to_messages
from tavernkit.prompt.state import PromptState, Substitute
from tavernkit.text.macros.evaluator import substitute_macros
from tavernkit.text.regex_scripts import (
    ActiveScripts,
    RegexMacros,
    RegexPlacement,
    sanitize_regex_macro,
)

__all__ = [
    "ChatTexts",
    "PromptRegex",
    "chat_texts",
    "message_placement",
    "prompt_regex",
    "regex_macros",
]


def regex_macros(substitute: Substitute | Callable[[str], str]) -> RegexMacros:
    """The scripts' macros from a build's evaluator: the evaluator itself, a copy whose every
    macro value is regex-escaped (the ``ESCAPED`` find mode), and one with another
    ``{{char}}`` (trim strings under ``/sendas``). Variables are shared with the build."""
    if not isinstance(substitute, MacroSubstitute):
        return RegexMacros(plain=lambda text: substitute(text))
    env, compat = substitute.env, substitute.compat

    def escaped(text: str) -> str:
        return substitute_macros(
            text, dataclasses.replace(env, post_process=sanitize_regex_macro), compat=compat
        )

    def for_character(text: str, name: str) -> str:
        return substitute_macros(text, dataclasses.replace(env, char=name), compat=compat)

    return RegexMacros(
        plain=lambda text: substitute(text), escaped=escaped, for_character=for_character
    )


def message_placement(message: Message) -> RegexPlacement:
    """Where a chat message's text counts: the user's as USER_INPUT, any other as AI_OUTPUT."""
    return RegexPlacement.USER_INPUT if message.is_user else RegexPlacement.AI_OUTPUT


@dataclass(frozen=True, slots=True)
class PromptRegex:
    """The active scripts of one build, bound to its macros."""

    scripts: ActiveScripts
    macros: RegexMacros

    def message(self, message: Message, text: str, depth: int) -> str:
        return self.scripts.run(
            text, message_placement(message), self.macros, prompt=True, depth=depth
        )

    def reasoning(self, text: str, depth: int) -> str:
        return self.scripts.run(
            text, RegexPlacement.REASONING, self.macros, prompt=True, depth=depth
        )

    def world_info(self, text: str, depth: int | None) -> str:
        return self.scripts.run(
            text, RegexPlacement.WORLD_INFO, self.macros, prompt=True, depth=depth
        )


def prompt_regex(state: PromptState, substitute: Substitute) -> PromptRegex | None:
    """The build's scripts, or ``None`` when none of them can change a prompt."""
    scripts = state.regex
    if scripts is None or not scripts:
        return None
    if not any(
        scripts.may_change(placement, prompt=True)
        for placement in (
            RegexPlacement.USER_INPUT,
            RegexPlacement.AI_OUTPUT,
            RegexPlacement.REASONING,
            RegexPlacement.WORLD_INFO,
        )
    ):
        return None
    return PromptRegex(scripts, regex_macros(substitute))


@dataclass(slots=True)
class ChatTexts:
    """The prompt text of a build's chat messages: ``added`` holds those with their reasoning
    added back (by chat index), :meth:`text` gives any message's (regex scripts applied, each
    message once)."""

    added: dict[int, str]
    rewrite: Callable[[int, Message], str] | None = None

    def text(self, index: int, message: Message) -> str:
        found = self.added.get(index)
        if found is not None:
            return found
        if self.rewrite is not None:
            return self.rewrite(index, message)
        mes = message.mes
        return mes if isinstance(mes, str) else message.text


@dataclass(slots=True)
class _Rewrite:
    regex: PromptRegex
    total: int
    position_of: Callable[[int], int]
    shift: int
    done: dict[int, str] = field(default_factory=dict)

    def __call__(self, index: int, message: Message) -> str:
        found = self.done.get(index)
        if found is None:
            mes = message.mes
            text = mes if isinstance(mes, str) else message.text
            depth = self.total - self.position_of(index) - self.shift
            found = self.done[index] = self.regex.message(message, text, depth)
        return found


def chat_texts(
    state: PromptState,
    chat: Sequence[tuple[int, Message]],
    *,
    kind: str,
    substitute: Substitute,
) -> ChatTexts:
    """The prompt texts of ``chat`` (``Generate``'s pass over ``coreChat``: ``(chat index,
    message)`` pairs, oldest first): each message through the prompt-only scripts at its
    depth, then the reasoning added back to the newest ones (itself through the REASONING
    scripts)."""
    regex = prompt_regex(state, substitute)
    if regex is None:
        added = add_reasoning_to_messages(state, chat, kind=kind, substitute=substitute)
        return ChatTexts(added)
    position_of: Callable[[int], int] | None = getattr(chat, "position_of", None)
    if position_of is None:  # a plain list: CoreChat knows its positions without a table
        positions = {index: position for position, (index, _) in enumerate(chat)}
        position_of = positions.__getitem__
    rewrite = _Rewrite(regex, len(chat), position_of, 2 if kind == "continue" else 1)
    added = add_reasoning_to_messages(
        state,
        chat,
        kind=kind,
        substitute=substitute,
        content_of=rewrite,
        reasoning_of=regex.reasoning,
    )
    return ChatTexts(added, rewrite)
