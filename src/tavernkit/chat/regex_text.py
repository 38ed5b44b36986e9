"""What the regex scripts do to what is stored and what is shown (reference A7).

| text | stored after the plain ... scripts | shown with the display-only ... scripts |
|---|---|---|
| the user's message | USER_INPUT (then its macros) | USER_INPUT |
| a reply | AI_OUTPUT | AI_OUTPUT |
| reasoning | REASONING | REASONING |
| an impersonation (input box) | USER_INPUT | |
| ``/sendas`` text | SLASH_COMMAND | AI_OUTPUT |
| a narrator message (``/sys``) | none | SLASH_COMMAND |
| an edit | the message's, those with ``runOnEdit`` | |

"Plain" scripts are those with neither ``markdownOnly`` nor ``promptOnly``: they run once, on
what is stored. A ``markdownOnly`` script never changes the stored text: :meth:`RegexText.
display` gives the text to show instead (the web UI's ``display`` field, the terminal's
view), with the message's display depth (:func:`display_depths`: its place from the end
among the messages that are not hidden, the newest 0).

:func:`regex_text` binds a turn's scripts (:func:`~tavernkit.prompt.from_chat_state.
script_lists`) to its macro evaluator; it is ``None`` when no script can run, so a chat
without scripts pays nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.models.chat import Message
from tavernkit.models.state import ChatState
from tavernkit.prompt.core_chat import core_chat
from tavernkit.prompt.from_chat_state import main_api_of, script_lists
from tavernkit.prompt.pipeline import PromptTarget, begin
from tavernkit.prompt.regex import chat_texts, regex_macros
from tavernkit.prompt.state import Substitute
from tavernkit.text.regex_scripts import ActiveScripts, RegexMacros, RegexPlacement

__all__ = [
    "RegexText",
    "continued_prompt_text",
    "display_depths",
    "display_placement",
    "regex_text",
    "state_regex_text",
]


def display_placement(message: Message) -> RegexPlacement:
    """Where a shown message counts: the user's as USER_INPUT, a narrator's or a hidden one's
    as SLASH_COMMAND, any other as AI_OUTPUT."""
    if message.is_user:
        return RegexPlacement.USER_INPUT
    if message.extra.type == "narrator" or message.is_system:
        return RegexPlacement.SLASH_COMMAND
    return RegexPlacement.AI_OUTPUT


def display_depths(messages: Sequence[Message]) -> list[int | None]:
    """Each message's display depth: its place from the end among the messages that are not
    hidden (the newest 0); ``None`` for a hidden one (no depth: the window does not apply)."""
    out: list[int | None] = [None] * len(messages)
    depth = 0
    for index in range(len(messages) - 1, -1, -1):
        if not messages[index].is_system:
            out[index] = depth
            depth += 1
    return out


@dataclass(frozen=True, slots=True)
class RegexText:
    """A turn's active scripts bound to its macros (see the module docstring)."""

    scripts: ActiveScripts
    macros: RegexMacros

    def user_input(self, text: str) -> str:
        """The user's typed text before its macros are evaluated and it is stored."""
        return self.scripts.run(text, RegexPlacement.USER_INPUT, self.macros)

    def reply(self, text: str) -> str:
        """A reply as it is stored."""
        return self.scripts.run(text, RegexPlacement.AI_OUTPUT, self.macros)

    def impersonation(self, text: str) -> str:
        """An impersonation as it goes to the input box (USER_INPUT, not AI_OUTPUT)."""
        return self.scripts.run(text, RegexPlacement.USER_INPUT, self.macros)

    def reasoning(self, text: str) -> str:
        """Received reasoning as it is stored."""
        return self.scripts.run(text, RegexPlacement.REASONING, self.macros)

    def send_as(self, text: str, character: str) -> str:
        """``/sendas`` text as it is stored (``{{char}}`` of the trim strings: that character)."""
        return self.scripts.run(
            text, RegexPlacement.SLASH_COMMAND, self.macros, character_override=character
        )

    def edit(self, message: Message, text: str) -> str:
        """A message's edited text as it is stored (scripts with ``runOnEdit``)."""
        placement = (
            RegexPlacement.USER_INPUT
            if message.is_user
            else RegexPlacement.SLASH_COMMAND
            if message.extra.type == "narrator"
            else RegexPlacement.AI_OUTPUT
        )
        return self.scripts.run(text, placement, self.macros, edit=True)

    def edit_reasoning(self, text: str) -> str:
        return self.scripts.run(text, RegexPlacement.REASONING, self.macros, edit=True)

    def display(self, message: Message, depth: int | None, text: str | None = None) -> str:
        """What a stored message shows (its text, or ``text``, through the display-only
        scripts at its display depth)."""
        shown = message.text if text is None else text
        return self.scripts.run(
            shown, display_placement(message), self.macros, markdown=True, depth=depth
        )

    def display_reasoning(self, text: str) -> str:
        return self.scripts.run(text, RegexPlacement.REASONING, self.macros, markdown=True)

    def may_change_display(self) -> bool:
        return any(
            self.scripts.may_change(p, markdown=True)
            for p in (
                RegexPlacement.USER_INPUT,
                RegexPlacement.AI_OUTPUT,
                RegexPlacement.SLASH_COMMAND,
                RegexPlacement.REASONING,
            )
        )


def regex_text(
    state: ChatState, substitute: Substitute, *, main_api: str | None = None
) -> RegexText | None:
    """The turn's scripts bound to ``substitute`` (the turn's macro evaluator); ``None`` when
    no script can run."""
    if not state.settings.regex.enabled:
        return None
    active = script_lists(state, main_api or main_api_of(state)).active()
    if not active:
        return None
    return RegexText(active, regex_macros(substitute))


def state_regex_text(
    state: ChatState,
    *,
    main_api: str | None = None,
    compat: str | None = None,
    variables: Any = None,
) -> RegexText | None:
    """:func:`regex_text` with the state's own macro evaluator (``variables``: the turn's, so
    a replacement's ``{{setvar}}`` lands where the turn's macros do); the evaluator is made
    only when some script can run."""
    if not state.settings.regex.enabled:
        return None
    api = main_api or main_api_of(state)
    active = script_lists(state, api).active()
    if not active:
        return None
    session = begin(state, PromptTarget(main_api=api), compat=compat, variables=variables)
    return RegexText(active, regex_macros(session.substitute))


def continued_prompt_text(
    state: ChatState, *, main_api: str, compat: str | None = None, variables: Any = None
) -> str | None:
    """The prompt text of the message a ``continue`` extends (its prompt-only scripts
    applied), when it differs from the stored one. SillyTavern 1.18 stores the continuation
    after *that* text (reference A7, "continue stores prompt-only edits"); ``compat="st-1.18"``
    reproduces it, the default keeps the stored text."""
    session = begin(state, PromptTarget(main_api=main_api), compat=compat, variables=variables)
    chat = core_chat(session.prompt_state.messages, "continue")
    if not len(chat):
        return None
    index, message = chat[-1]
    texts = chat_texts(session.prompt_state, chat, kind="continue", substitute=session.substitute)
    if texts.rewrite is None:
        return None
    text = texts.rewrite(index, message)
    return None if text == message.text else text
