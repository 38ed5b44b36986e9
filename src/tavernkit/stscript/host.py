"""What a script drives: the chat, the input box, toasts, generation, quick replies, regex.

:class:`ScriptHost` holds that state in memory, in SillyTavern's shapes (messages as the
dictionaries of a chat file, ``chat_metadata``, the variables), so the commands can follow
SillyTavern rule for rule. Its ``async`` methods are the points where a real chat takes over:
a subclass stores each change as it happens (:mod:`tavernkit.chat.script_host` writes through
to the store and generates through the chat service); the in-memory host is what tests and the
conformance suite run on, with a ``generator`` callable standing in for the model.

Commands that wait for the user (``/input``, ``/popup``, ``/buttons``, ``/echo
awaitDismissal``) put a :class:`Question` to ``asker``, the host's callback (the web UI's
dialog through the server, ``tavernkit chat``'s terminal); without one, :meth:`ScriptHost.ask`
answers None and each command returns what it returns when no one can be asked.

A stored chat's ``chat`` holds only the messages read so far (its tail, back to the last
visible user and character messages, which the chat's macros read); a command that reads other
messages awaits :meth:`ScriptHost.load_messages` for them first.

Regex scripts are reached through :class:`RegexBridge`; the default one has no scripts (text
passes unchanged, ``/regex`` reports that no script of that name exists). :mod:`tavernkit.regex`
is the real one (``host.regex = script_bridge(scripts)``; a stored chat sets its own).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, MutableSequence, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from tavernkit.stscript.quick_replies import QuickReplyLibrary
from tavernkit.text.macros import MacroEnv
from tavernkit.text.regex_scripts.engine import RegexPlacement
from tavernkit.text.variables import InMemoryVariables

__all__ = [
    "Answer",
    "Asker",
    "CharacterRef",
    "GenerationKind",
    "GenerationRequest",
    "NoRegex",
    "Question",
    "QuestionKind",
    "RegexBridge",
    "RegexCommand",
    "RegexPlacement",
    "RegexReply",
    "ScriptHost",
    "Toast",
    "last_visible",
]

GenerationKind = Literal[
    "quiet", "raw", "normal", "continue", "regenerate", "swipe", "impersonate", "send"
]


@dataclass(frozen=True, slots=True)
class Toast:
    """One ``toastr`` call: ``type`` info/warning/error/success, the message, the title and
    the options SillyTavern passed (``escapeHtml``, ``timeOut`` …)."""

    type: str
    message: str
    title: str | None = None
    options: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A generation a command asks for.

    ``quiet`` (``/gen``): the chat's prompt with ``prompt`` as the last instruction;
    ``raw`` (``/genraw``): ``prompt`` alone (``system``, ``prefill``, ``instruct``);
    ``send``: the input box's text sent as the user (``prompt``), then a normal reply;
    ``normal``/``continue``/``regenerate``/``swipe``/``impersonate``: the chat's own turns
    (``/trigger``, ``/continue`` …).
    """

    kind: GenerationKind
    prompt: str = ""
    quiet_to_loud: bool = False
    name: str | None = None
    length: int | None = None
    trim: bool = False
    stop: tuple[str, ...] | None = None
    system: str = ""
    prefill: str = ""
    instruct: bool = True
    member: str | None = None
    wait: bool = True


QuestionKind = Literal["input", "popup", "buttons", "echo"]


@dataclass(frozen=True, slots=True)
class Question:
    """What a command asks the user, as SillyTavern's popup shows it.

    ``input``: ``text`` over a text box holding ``default`` (``rows``, ``large``, ``wide``);
    ``popup``: ``text`` with an OK button and, with ``cancel_button``, a second one;
    ``buttons``: ``text`` over one button per ``labels`` item (``multiple``: toggles, then OK);
    ``echo``: a toast (``severity``, ``title``) the script waits to see dismissed.
    ``ok_button`` None: the dialog's own word for OK (translated by the asker)."""

    kind: QuestionKind
    text: str
    default: str = ""
    ok_button: str | None = None
    cancel_button: str | None = None
    labels: tuple[str, ...] = ()
    multiple: bool = False
    large: bool = False
    wide: bool = False
    rows: int = 4
    severity: str = "info"
    title: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "default": self.default,
            "ok_button": self.ok_button,
            "cancel_button": self.cancel_button,
            "labels": list(self.labels),
            "multiple": self.multiple,
            "large": self.large,
            "wide": self.wide,
            "rows": self.rows,
            "severity": self.severity,
            "title": self.title,
        }


@dataclass(frozen=True, slots=True)
class Answer:
    """What the user did with a :class:`Question`.

    ``button``: ``"ok"`` (OK, or a ``/buttons`` choice: ``chosen`` holds the label indexes),
    ``"cancel"`` (the popup's second button), or None: closed without a button (Escape, the
    dialog's close, no answer in time). ``text``: what ``/input``'s box held."""

    button: Literal["ok", "cancel"] | None = None
    text: str = ""
    chosen: tuple[int, ...] = ()


#: answers a question (a dialog, a terminal prompt); its time is not the script's own
Asker = Callable[[Question], Awaitable[Answer]]


@dataclass(frozen=True, slots=True)
class CharacterRef:
    """A character a message can be sent as: its name and avatar file."""

    name: str
    avatar: str = ""


RegexCommand = Literal["regex", "regex-state", "regex-toggle"]


@dataclass(frozen=True, slots=True)
class RegexReply:
    """A ``/regex*`` command's pipe value and the toasts SillyTavern shows for it."""

    output: str
    toasts: tuple[Toast, ...] = ()


class RegexBridge(Protocol):
    """The regex engine as commands need it (:mod:`tavernkit.regex` is the real one).

    ``env`` is the chat's macro environment (the scripts' ``{{char}}``, variables …); without
    one no macro is expanded."""

    def apply(
        self,
        text: str,
        placement: int,
        *,
        character_override: str | None = None,
        env: MacroEnv | None = None,
    ) -> str:
        """``getRegexedString`` with no flags: the text as it is stored."""
        ...

    async def command(
        self,
        command: RegexCommand,
        script: str | None,
        text: str = "",
        *,
        state: str | None = None,
        quiet: bool = False,
        env: MacroEnv | None = None,
    ) -> RegexReply:
        """``/regex name=script text``, ``/regex-state script`` or ``/regex-toggle
        [state=] [quiet=] script``."""
        ...


class NoRegex:
    """No regex scripts: text passes unchanged and every named script is unknown."""

    def apply(
        self,
        text: str,
        placement: int,
        *,
        character_override: str | None = None,
        env: MacroEnv | None = None,
    ) -> str:
        return text

    async def command(
        self,
        command: RegexCommand,
        script: str | None,
        text: str = "",
        *,
        state: str | None = None,
        quiet: bool = False,
        env: MacroEnv | None = None,
    ) -> RegexReply:
        if command == "regex" and not script:
            return RegexReply(text, (Toast("warning", "No regex script name provided."),))
        missing = Toast("warning", f'Regex script "{script or ""}" not found.')
        return RegexReply(text if command == "regex" else "", (missing,))


Generator = Callable[[GenerationRequest, "ScriptHost"], Awaitable[str]]


async def _no_generator(request: GenerationRequest, host: ScriptHost) -> str:
    return ""


@dataclass(eq=False)
class ScriptHost:
    """A chat as a script sees it, held in memory (see the module docstring).

    ``chat`` is the list of messages (SillyTavern's dictionaries, oldest first, at their
    absolute indexes; a stored chat's holds only what was read, see :meth:`load_messages`),
    ``metadata``
    the chat's ``chat_metadata`` (``variables`` is kept in ``variables``, ``script_injects``
    here), ``input_text`` the input box. ``clock`` stamps messages; ``generator`` answers
    generations (the default answers ``''``).
    """

    user_name: str = "User"
    char_name: str = ""
    chat: MutableSequence[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    variables: InMemoryVariables = field(default_factory=InMemoryVariables)
    input_text: str = ""
    quick_replies: QuickReplyLibrary = field(default_factory=QuickReplyLibrary)
    regex: RegexBridge = field(default_factory=NoRegex)
    characters: list[CharacterRef] = field(default_factory=list)
    user_avatar: str = "user-default.png"
    personas: dict[str, str] = field(default_factory=dict)  # avatar file -> persona name
    generator: Generator = _no_generator
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    toasts: list[Toast] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    env_factory: Callable[[ScriptHost], MacroEnv] | None = None
    #: ``/tokens``: the chat's token counter (None: SillyTavern's estimate, bytes / 3.35)
    count_tokens: Callable[[str], int] | None = None
    #: names shown once: SillyTavern warns about ``/sendas`` without ``name`` once per profile
    warned: set[str] = field(default_factory=set)
    #: who answers ``/input``, ``/popup``, ``/buttons`` (None: no one can be asked)
    asker: Asker | None = None

    # -- what the macro engine sees -----------------------------------------------------------

    def macro_env(self) -> MacroEnv:
        """The macro environment for the current chat (``env_factory``'s when set)."""
        if self.env_factory is not None:
            return self.env_factory(self)
        return self.chat_macro_env()

    def chat_macro_env(self) -> MacroEnv:
        """Names, the chat's last messages and the input box, from what is held here."""
        last, last_user, last_char = last_visible(self.chat)
        swipes = last.get("swipes") if last else None
        return MacroEnv(
            user=self.user_name,
            char=self.char_name,
            input=self.input_text,
            last_message=str(last.get("mes", "")) if last else "",
            last_message_id=len(self.chat) - 1 if self.chat else None,
            last_user_message=str(last_user.get("mes", "")) if last_user else "",
            last_char_message=str(last_char.get("mes", "")) if last_char else "",
            last_swipe_id=len(swipes) if isinstance(swipes, list) else None,
            current_swipe_id=(int(last.get("swipe_id") or 0) + 1) if last and swipes else None,
            message_count=len(self.chat),
            variables=self.variables,
            compat="st-1.18",
        )

    # -- feedback ---------------------------------------------------------------------------

    def toast(self, toast: Toast) -> None:
        self.toasts.append(toast)

    def show(self, text: str, *, as_html: bool = False) -> None:
        """A popup or a chat-only note (``return=popup-html`` …); the in-memory host keeps
        them in ``shown``."""
        self.shown.append(text)

    async def ask(self, question: Question) -> Answer | None:
        """Put ``question`` to the user; None when no one can be asked (a headless run)."""
        if self.asker is None:
            return None
        return await self.asker(question)

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def find_character(self, name: str) -> CharacterRef | None:
        if self.char_name and name == self.char_name:
            return next((c for c in self.characters if c.name == name), CharacterRef(name))
        return next((c for c in self.characters if c.name == name), None)

    def find_persona(self, name: str) -> str | None:
        return next((avatar for avatar, n in self.personas.items() if n == name), None)

    # -- changes (a stored chat overrides these to write through) -------------------------

    async def load_messages(self, start: int, stop: int) -> None:
        """Make the messages ``start`` to ``stop - 1`` readable in ``chat`` before a command
        reads them (a stored chat reads them from the store; the in-memory one holds all)."""

    async def insert_message(self, message: dict[str, Any], at: int | None = None) -> int:
        """Add ``message`` at ``at`` (None: the end); returns its index."""
        if at is None or not 0 <= at <= len(self.chat):
            self.chat.append(message)
            return len(self.chat) - 1
        self.chat.insert(at, message)
        return at

    async def delete_messages(self, indices: list[int]) -> list[dict[str, Any]]:
        """Delete the messages at ``indices``; returns them, oldest first."""
        removed = [self.chat[i] for i in sorted(set(indices)) if 0 <= i < len(self.chat)]
        keep = set(range(len(self.chat))) - set(indices)
        self.chat[:] = [m for i, m in enumerate(self.chat) if i in keep]
        return removed

    async def update_message(self, index: int, message: dict[str, Any]) -> None:
        self.chat[index] = message

    async def save_metadata(self) -> None:
        """The chat's metadata (``script_injects``) changed."""

    async def save_quick_replies(self) -> None:
        """The quick-reply sets or their bindings changed."""

    async def generate(self, request: GenerationRequest) -> str:
        """Run a generation; ``send``/``normal``/… turns add their messages to ``chat``."""
        return await self.generator(request, self)

    def snapshot(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(message) for message in self.chat]


def last_visible(
    chat: Sequence[dict[str, Any]],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The last visible (not ``is_system``) message, the last visible user's and the last
    visible character's: read from the newest back, no further than the oldest of them (all
    the chat's macros read besides its length, so a stored chat need only hold its tail)."""
    last = last_user = last_char = None
    for index in range(len(chat) - 1, -1, -1):
        message = chat[index]
        if message.get("is_system"):
            continue
        if last is None:
            last = message
        if message.get("is_user"):
            if last_user is None:
                last_user = message
        elif last_char is None:
            last_char = message
        if last_user is not None and last_char is not None:
            break
    return last, last_user, last_char
