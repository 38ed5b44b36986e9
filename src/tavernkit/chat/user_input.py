"""The user's message of a turn, stored (:class:`UserInputWriter`): its regex scripts and
macros run over the chat's state, which the turn then builds from (read once per turn), and
the variables the macros set written; a message that set none waits to be written with the
reply's place (:class:`UserInput`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.chat.prepare import TurnOverrides, after_user_message
from tavernkit.chat.regex_text import state_regex_text
from tavernkit.chat.turn_options import Overrides
from tavernkit.models.chat import ImagePart, Message, TextPart
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.prompt.macros import may_hold_macros
from tavernkit.prompt.pipeline import begin
from tavernkit.store.chat_state import load_chat_state, load_user_name
from tavernkit.store.chat_window import windowed
from tavernkit.store.protocol import Store
from tavernkit.text.variables import InMemoryVariables

__all__ = ["UserInput", "UserInputWriter"]


@dataclass(frozen=True, slots=True)
class UserInput:
    """What storing the user's message leaves the turn: the chat's state with the message in
    it, and the message itself while its write waits to go with the reply's place (one
    transaction for both; written alone first if the turn fails before, or reloads the chat).
    ``unwritten`` is ``None`` once the message is stored."""

    state: ChatState
    unwritten: Message | None = None


@dataclass(frozen=True, slots=True)
class UserInputWriter:
    """Stores a turn's user message in ``store`` for ``owner``, dated by ``now``."""

    store: Store
    owner: str
    now: Callable[[], str]

    async def write(
        self,
        chat_id: str,
        text: str,
        attachments: Sequence[ImagePart | str],
        overrides: Overrides,
        *,
        reuse: bool = True,
    ) -> UserInput | None:
        """Store the user's message, its macros evaluated, and return the chat's state as it
        is after the store (message appended, variables set), so the turn builds from it
        instead of loading it again: the state is read once per turn. A message that set no
        variables is not written yet: it is :attr:`UserInput.unwritten`, stored with the
        reply's place in one transaction (see :meth:`.turn_core.TurnCore._generate`).
        ``reuse=False`` (a caller that builds from another state) stores typed text without
        macros as it is, reading only the user's name, and returns ``None``."""
        ov = TurnOverrides.of(overrides)
        evaluate = may_hold_macros(text)
        if not evaluate and not reuse and not await self.may_run_regex():
            # Stored as typed: the chat, the card and the books are not read at all.
            user = await load_user_name(self.store, chat_id, owner=self.owner, persona=ov.persona)
            await self.store.append_message(
                chat_id, self.message(user, text, attachments), owner=self.owner
            )
            return None

        async def read(window: int) -> tuple[ChatState, InMemoryVariables, str]:
            state = await load_chat_state(
                self.store, owner=self.owner, chat_id=chat_id, persona=ov.persona, window=window
            )
            variables = InMemoryVariables(dict(state.local_variables), dict(state.global_variables))
            typed = text
            # the plain USER_INPUT regex scripts, then the macros (sendMessageAsUser's order)
            scripts = state_regex_text(state, compat=ov.compat, variables=variables)
            if scripts is not None:
                typed = scripts.user_input(typed)
            if not may_hold_macros(typed):
                return state, variables, typed
            substitute = begin(state, compat=ov.compat, variables=variables).substitute
            return state, variables, substitute(typed)

        state, variables, typed = await windowed(chat_id, read)
        message = self.message(state.user_name, typed, attachments)
        changed = variables.local_vars != state.local_variables or any(
            state.global_variables.get(k) != v for k, v in variables.global_vars.items()
        )
        if not changed:
            after = after_user_message(state, message, None, state.global_variables)
            return UserInput(after, unwritten=message)
        await self.store.append_message(chat_id, message, owner=self.owner)
        metadata = None
        if variables.local_vars != state.local_variables and state.chat is not None:
            metadata = state.chat.metadata.model_copy(deep=True)
            metadata.variables = variables.local_vars
            await self.store.update_chat_metadata(chat_id, metadata.to_wire(), owner=self.owner)
        await self.save_globals(variables, state.global_variables)
        return UserInput(after_user_message(state, message, metadata, variables.global_vars))

    async def may_run_regex(self) -> bool:
        """Whether the owner's settings hold regex scripts that may change a message before
        it is stored (a group chat's typed text, which names no character, then goes
        through them)."""
        settings = await self.store.get_settings(owner=self.owner)
        if not isinstance(settings, Settings):
            return False
        regex = settings.regex
        return regex.enabled and bool(regex.scripts or regex.allowed_presets)

    def message(self, name: str, text: str, attachments: Sequence[ImagePart | str]) -> Message:
        content: str | list[TextPart | ImagePart] = text
        if attachments:
            images = [a if isinstance(a, ImagePart) else ImagePart.from_url(a) for a in attachments]
            content = [*([TextPart(text=text)] if text else []), *images]
        return Message.new(name, content, is_user=True, send_date=self.now())

    async def save_globals(self, variables: InMemoryVariables, before: Mapping[str, Any]) -> None:
        for name, value in variables.global_vars.items():
            if before.get(name) != value:
                await self.store.set_global_variable(name, value, owner=self.owner)
