"""STscript on a stored chat: the script host that writes through to the store.

:class:`StoredChatHost` loads one chat (``chat_metadata``, the owner's global variables,
quick-reply sets and bindings, the character and persona names, the regex scripts of the chat:
global, allowed card-scoped and allowed preset ones) into a
:class:`~tavernkit.stscript.host.ScriptHost`, its messages as
:class:`~tavernkit.chat.script_pages.ChatPages`: the tail the chat's macros read (back to the
last visible user and character messages), and any other range when a command asks for it, so
a script costs what it reads, not the chat's length. It stores every change as the script makes
it: added, deleted and hidden messages at once, script injections and variables before each
generation and at the end, quick-reply sets when a command changes them. Generations go
through the chat service (``/gen`` is :meth:`ChatService.quiet`, ``/trigger`` a reply,
``/continue`` … the service's verbs; ``/genraw`` the ``raw`` callable, a
:meth:`TavernContext.generate_raw`), each one preceded by ``admit`` (the server's per-user
turn limit), so a script generates exactly as the user could by hand.

Where bindings live: the global quick-reply sets are ``settings.selections.quick_reply_sets``
(names, in order), the chat's are SillyTavern's ``chat_metadata.quickReply``
(``{setList: [{set, isVisible}]}``) and the character's come from its card
(``data.extensions.quick_reply_sets``: set names, or whole exported sets, which are added to the
user's sets the first time).

:func:`run_chat_script` runs one script and returns a :class:`ScriptOutcome` (the pipe, how it
ended, the toasts and the input box), never raising for a script's own failure.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack

from tavernkit.chat.prepare import TurnOverrides
from tavernkit.chat.script_pages import ChatPages, runs
from tavernkit.chat.service import ChatService
from tavernkit.errors import NotFound, OutsideWindow, ScriptError
from tavernkit.models.chat import Message
from tavernkit.models.quick_reply import QuickReply, QuickReplySet
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.prompt.from_chat_state import script_lists
from tavernkit.quick_reply_bindings import QR_KIND, load_library
from tavernkit.regex import ScriptsBridge
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_types import StoredMessage
from tavernkit.store.chat_window import GROWTH
from tavernkit.stscript import (
    Asker,
    Budget,
    CharacterRef,
    CommandRegistry,
    GenerationRequest,
    ScriptHost,
    ScriptRunner,
    Toast,
    default_registry,
)
from tavernkit.stscript.host import last_visible
from tavernkit.stscript.quick_replies import link_list, menu_reply
from tavernkit.text.macros import MacroEnv, env_from_chat_state
from tavernkit.text.regex_scripts import CommandResult
from tavernkit.text.tokens import tokenizer_for_model
from tavernkit.text.variables import InMemoryVariables

__all__ = [
    "RawGenerator",
    "ScriptOutcome",
    "ScriptRunOptions",
    "StoredChatHost",
    "run_chat_quick_reply",
    "run_chat_script",
]

#: the chat's newest messages a script host reads first (and the oldest up to the first
#: visible one): the macros' last messages are almost always among them
FIRST_PAGE = 32

#: ``/genraw``: ``TavernContext.generate_raw``'s signature (prompt, then its options)
RawGenerator = Callable[..., Awaitable[str]]


#: stores a ``/regex-toggle``'s change (its command result) for the chat's state
RegexToggleStore = Callable[[CommandResult, ChatState], Awaitable[None]]


@dataclass(eq=False)
class StoredChatHost(ScriptHost):
    """A :class:`ScriptHost` bound to a stored chat (see the module docstring)."""

    chats: ChatService | None = None
    chat_id: str = ""
    raw: RawGenerator | None = None
    admit: Callable[[], Awaitable[None]] | None = None
    #: stores a ``/regex-toggle``'s change where the script lives (the services layer's
    #: RegexAdmin, given by the facade: the chat layer does not edit records itself)
    store_regex_toggle: RegexToggleStore | None = None
    state: ChatState | None = None
    _pages: ChatPages = field(default_factory=lambda: ChatPages(0, _no_messages))
    _saved_globals: dict[str, Any] = field(default_factory=dict)
    _saved_sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    _saved_global_links: list[str] = field(default_factory=list)

    @classmethod
    async def open(
        cls,
        chats: ChatService,
        chat_id: str,
        *,
        raw: RawGenerator | None = None,
        admit: Callable[[], Awaitable[None]] | None = None,
        input_text: str = "",
        store_regex_toggle: RegexToggleStore | None = None,
    ) -> StoredChatHost:
        host = cls(
            chats=chats,
            chat_id=chat_id,
            raw=raw,
            admit=admit,
            input_text=input_text,
            store_regex_toggle=store_regex_toggle,
        )
        await host.reload()
        await host._load_quick_replies()
        return host

    @property
    def _service(self) -> ChatService:
        if self.chats is None:  # pragma: no cover - open() always sets it
            raise RuntimeError("the host is not bound to a chat service")
        return self.chats

    # -- loading ----------------------------------------------------------------------------

    async def reload(self) -> None:
        """Read the chat's tail, its metadata, the variables and the names again: the older
        messages are read when a command asks for them (:meth:`load_messages`), so a script
        costs what it reads, not the chat's length."""
        service = self._service
        store, owner = service.store, service.owner
        window = await store.load_chat_window(self.chat_id, last=FIRST_PAGE, owner=owner)
        self.chat_id = window.info.id
        pages = ChatPages(window.info.message_count, self._read_messages)
        pages.hold(0, window.head)
        pages.hold(window.info.message_count - len(window.tail), window.tail)
        self.chat = self._pages = pages
        metadata = window.header.get("chat_metadata")
        self.metadata = copy.deepcopy(dict(metadata)) if isinstance(metadata, Mapping) else {}
        local = self.metadata.pop("variables", None)
        # the names, card, persona and scripts: the state of a one-message window, no books
        # (no command scans world info)
        self.state = await load_chat_state(
            store, owner=owner, chat_id=self.chat_id, window=1, books=False
        )
        state = self.state
        globals_ = state.global_variables
        self.variables = InMemoryVariables(
            dict(local) if isinstance(local, Mapping) else {}, dict(globals_)
        )
        self._saved_globals = dict(globals_)
        self.user_name = state.persona.name if state.persona is not None else state.user_name
        character = state.character
        self.char_name = character.name if character is not None else ""
        self.characters = [CharacterRef(self.char_name, state.character_filename or "")]
        self.env_factory = _env_factory
        model = state.profile.model if state.profile is not None else None
        self.count_tokens = tokenizer_for_model(model).count
        self.regex = ScriptsBridge(script_lists(state), store_toggle=self._store_regex_toggle)
        await self._hold_macro_tail()

    async def _read_messages(self, start: int, stop: int) -> list[StoredMessage]:
        service = self._service
        return await service.store.load_message_range(
            self.chat_id, start=start, stop=stop, owner=service.owner
        )

    async def load_messages(self, start: int, stop: int) -> None:
        await self._pages.load(start, stop)

    async def _hold_macro_tail(self) -> None:
        """Hold the chat's tail back to its last visible user and character messages, which
        the chat's macros read (:func:`~tavernkit.stscript.host.last_visible`): read further
        back, a larger page each time, until they are found or the chat's start is."""
        size = FIRST_PAGE
        while True:
            try:
                last_visible(self.chat)
                return
            except OutsideWindow:
                length = len(self._pages)
                await self._pages.load(max(0, length - size), length)
                size *= GROWTH

    async def _store_regex_toggle(self, result: CommandResult) -> None:
        """``/regex-toggle``: the change stored where the script lives."""
        if self.state is not None and self.store_regex_toggle is not None:
            await self.store_regex_toggle(result, self.state)

    async def _load_quick_replies(self) -> None:
        service = self._service
        library = await load_library(service.store, service.owner, self.state, self.metadata)
        self.quick_replies = library
        self._saved_sets = {s.name: s.st_json() for s in library.sets}
        self._saved_global_links = [link.name for link in library.global_links]

    # -- writing through --------------------------------------------------------------------

    async def insert_message(self, message: dict[str, Any], at: int | None = None) -> int:
        index = await super().insert_message(message, at)
        service = self._service
        # in place: the later messages move down with their ids, and so do the chat's
        # branches that continue them (a delete-and-re-add would drop those branches)
        stored = await service.store.insert_message(
            self.chat_id, index, _storable(self.chat[index]), owner=service.owner
        )
        self._pages.set_id(index, stored.id)
        await self._hold_macro_tail()
        return index

    async def delete_messages(self, indices: list[int]) -> list[dict[str, Any]]:
        valid = sorted(i for i in set(indices) if 0 <= i < len(self.chat))
        spans = runs(valid)
        for start, count in spans:
            await self._pages.load(start, start + count)
        removed = [self.chat[i] for i in valid]
        service = self._service
        for start, count in reversed(spans):  # last first, so the earlier indexes still hold
            await service.store.remove_messages(self.chat_id, start, count, owner=service.owner)
            self._pages.drop(start, count)
        await self._hold_macro_tail()
        return removed

    async def update_message(self, index: int, message: dict[str, Any]) -> None:
        await self._pages.load(index, index + 1)
        await super().update_message(index, message)
        service = self._service
        await service.store.update_message(
            self._pages.message_id(index), _storable(message), owner=service.owner
        )
        await self._hold_macro_tail()

    async def save_metadata(self) -> None:
        """Store ``chat_metadata`` (script injections, chat quick-reply sets, variables) and the
        global variables that changed."""
        service = self._service
        store, owner = service.store, service.owner
        metadata = dict(self.metadata)
        metadata["variables"] = self.variables.export_local()
        await store.update_chat_metadata(self.chat_id, metadata, owner=owner)
        now = self.variables.global_vars
        for name in self._saved_globals.keys() - now.keys():
            await store.delete_global_variable(name, owner=owner)
        for name, value in now.items():
            if self._saved_globals.get(name, object()) != value:
                await store.set_global_variable(name, value, owner=owner)
        self._saved_globals = dict(now)

    async def save_quick_replies(self) -> None:
        service = self._service
        store, owner = service.store, service.owner
        library = self.quick_replies
        current = {s.name: s.st_json() for s in library.sets}
        for name in self._saved_sets.keys() - current.keys():
            await _delete_set(service, name)
        for qr_set in library.sets:
            if self._saved_sets.get(qr_set.name) != current[qr_set.name]:
                record_id = await _set_record_id(service, qr_set.name)
                await store.put(QR_KIND, qr_set, owner=owner, name=qr_set.name, id=record_id)
        self._saved_sets = current
        names = [link.name for link in library.global_links]
        if names != self._saved_global_links:
            settings = await service.store.get_settings(owner=owner)
            value = settings if isinstance(settings, Settings) else Settings()
            value.selections.quick_reply_sets = names
            await store.put_settings(value, owner=owner)
            self._saved_global_links = names
        self.metadata["quickReply"] = link_list(library.chat_links)
        await self.save_metadata()

    # -- generation -------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> str:
        service = self._service
        if self.admit is not None:
            await self.admit()
        await self.save_metadata()
        text = ""
        chat_id = self.chat_id
        match request.kind:
            case "quiet":
                # as=char changes nothing stored in SillyTavern 1.18 (the goldens): the reply
                # is only returned
                overrides = TurnOverrides(max_tokens=request.length, stop=request.stop or ())
                outcome = await service.quiet(
                    chat_id, request.prompt, quiet_name=request.name, overrides=overrides
                )
                text = outcome.text
            case "raw":
                if self.raw is None:
                    raise ScriptError("/genraw is not available here")
                text = await self.raw(
                    request.prompt,
                    system_prompt=request.system,
                    prefill=request.prefill,
                    instruct_override=not request.instruct,
                    response_length=request.length,
                    stop=request.stop or (),
                )
            case "send":
                typed, self.input_text = self.input_text, ""
                text = (await service.send(chat_id, typed)).text
            case "normal":
                text = (await service.send(chat_id, "")).text
            case "continue":
                text = (await service.continue_(chat_id)).text
            case "regenerate":
                text = (await service.regenerate(chat_id)).text
            case "swipe":
                text = (await service.swipe(chat_id)).text
            case "impersonate":
                text = (await service.impersonate(chat_id)).text
                self.input_text = text
        injects, links = self.metadata.get("script_injects"), self.metadata.get("quickReply")
        await self.reload()
        if injects is not None:
            self.metadata["script_injects"] = injects
        if links is not None:
            self.metadata["quickReply"] = links
        return text


def _storable(message: Mapping[str, Any]) -> Message:
    """A script's message as a stored one. SillyTavern writes ``is_system: ""`` for
    ``/sendas`` and ``/sys`` (a falsy bias check); it means ``false``."""
    data = dict(message)
    if not isinstance(data.get("is_system"), bool):
        data["is_system"] = bool(data.get("is_system"))
    return Message.model_validate(data)


async def _no_messages(start: int, stop: int) -> list[StoredMessage]:
    return []


def _env_factory(host: ScriptHost) -> MacroEnv:
    """The chat's macro environment: card and persona fields from the loaded state, chat
    statistics and the input box from what the script sees now (the state's own messages, a
    one-message window, are not read)."""
    base = host.chat_macro_env()
    state = host.state if isinstance(host, StoredChatHost) else None
    if state is None:
        return base
    fields = {
        "character": state.character,
        "persona": state.persona,
        "chat": state.chat,
        "profile": state.profile,
    }
    full = env_from_chat_state(fields, variables=host.variables, input=host.input_text)
    for name in (
        "last_message",
        "last_message_id",
        "last_user_message",
        "last_char_message",
        "last_swipe_id",
        "current_swipe_id",
        "message_count",
    ):
        setattr(full, name, getattr(base, name))
    full.compat = "st-1.18"
    return full


async def _set_record_id(service: ChatService, name: str) -> str | None:
    try:
        record = await service.store.get_record(QR_KIND, name, owner=service.owner)
    except NotFound:
        return None
    return record.info.id


async def _delete_set(service: ChatService, name: str) -> None:
    record_id = await _set_record_id(service, name)
    if record_id is not None:
        await service.store.delete(QR_KIND, record_id, owner=service.owner)


@dataclass(frozen=True, slots=True)
class ScriptOutcome:
    """How a script ended: its pipe, an abort (and its reason) or its error, what it showed."""

    pipe: str = ""
    aborted: bool = False
    abort_reason: str | None = None
    error: ScriptError | None = None
    toasts: tuple[Toast, ...] = ()
    shown: tuple[str, ...] = ()
    input_text: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        error = self.error
        return {
            "pipe": self.pipe,
            "aborted": self.aborted,
            "abort_reason": self.abort_reason,
            "error": None
            if error is None
            else {
                "name": error.name,
                "message": error.message,
                "line": error.line,
                "column": error.column,
                "hint": error.hint,
            },
            "toasts": [
                {"type": t.type, "message": t.message, "title": t.title, "options": t.options}
                for t in self.toasts
            ],
            "shown": list(self.shown),
            "input": self.input_text,
        }


class ScriptRunOptions(TypedDict, total=False):
    """How a script runs on a stored chat: ``raw`` generates for ``/gen`` and friends,
    ``admit`` is awaited before each generation (the turn rate), ``input_text`` is what the
    input box holds, ``registry`` the slash commands (the built-in ones by default),
    ``budget`` bounds the run, ``store_regex_toggle`` keeps ``/regex-toggle``'s changes and
    ``asker`` answers ``/input``, ``/popup`` and ``/buttons`` (None: no one can be asked, each
    returns what it returns headless)."""

    raw: RawGenerator | None
    admit: Callable[[], Awaitable[None]] | None
    input_text: str
    registry: CommandRegistry | None
    budget: Budget | None
    store_regex_toggle: RegexToggleStore | None
    asker: Asker | None


async def _open(
    chats: ChatService, chat_id: str, options: ScriptRunOptions, caller: str
) -> tuple[StoredChatHost, ScriptRunner]:
    """The chat's script host and a runner over it, as ``options`` ask."""
    unknown = sorted(set(options) - set(ScriptRunOptions.__annotations__))
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
    host = await StoredChatHost.open(
        chats,
        chat_id,
        raw=options.get("raw"),
        admit=options.get("admit"),
        input_text=options.get("input_text", ""),
        store_regex_toggle=options.get("store_regex_toggle"),
    )
    host.asker = options.get("asker")
    registry, budget = options.get("registry"), options.get("budget")
    runner = ScriptRunner(host, registry or default_registry(), budget=budget or Budget())
    return host, runner


async def run_chat_script(
    chats: ChatService,
    chat_id: str,
    text: str,
    **options: Unpack[ScriptRunOptions],
) -> ScriptOutcome:
    """Run the STscript ``text`` on a stored chat (see the module docstring). A script that
    does not parse, fails or runs past its budget comes back with ``error`` set; what it
    changed before that stays stored, as in SillyTavern."""
    host, runner = await _open(chats, chat_id, options, "run_chat_script")

    async def run() -> _Ended:
        result = await runner.run(text)
        if result is not None and result.is_aborted:
            return _Ended("", aborted=True, reason=result.abort_reason)
        return _Ended("" if result is None or result.pipe is None else str(result.pipe))

    return await _outcome(host, run)


async def run_chat_quick_reply(
    chats: ChatService,
    chat_id: str,
    set_name: str,
    reply: int | str,
    *,
    mode: Literal["click", "run"] = "click",
    parent: tuple[str, int | str] | None = None,
    **options: Unpack[ScriptRunOptions],
) -> ScriptOutcome:
    """Click the quick reply ``reply`` (its id, or its label) of the set ``set_name`` on a
    stored chat, with ``input_text`` typed, as SillyTavern's button does
    (:meth:`ScriptRunner.run_quick_reply`): a script runs (its errors as toasts), a text is
    sent as the user's message unless the set has ``disableSend``, when it is left in the
    input box (``input`` of the outcome). ``mode="run"``: as ``/run`` and automatic
    executions run it (the input is not joined). ``parent`` (a set's name and a reply of it):
    the reply was picked from that reply's context menu, so a chained link runs the parent's
    message first (:func:`~tavernkit.stscript.quick_replies.menu_reply`). An unknown set or
    reply is :class:`NotFound`."""
    host, runner = await _open(chats, chat_id, options, "run_chat_quick_reply")
    qr_set, found = _find_reply(host, set_name, reply)
    if parent is not None:
        found = menu_reply(_find_reply(host, *parent)[1], found, qr_set.name)

    async def run() -> _Ended:
        return _Ended(str(await runner.run_quick_reply(qr_set, found, mode=mode) or ""))

    return await _outcome(host, run)


def _find_reply(
    host: StoredChatHost, set_name: str, reply: int | str
) -> tuple[QuickReplySet, QuickReply]:
    qr_set = host.quick_replies.get(set_name)
    found = qr_set.find(reply) if qr_set is not None else None
    if qr_set is None or found is None:
        raise NotFound(f"no quick reply {reply!r} in a set named {set_name!r}")
    return qr_set, found


@dataclass(frozen=True)
class _Ended:
    """How a script run ended without an error: its pipe, or an ``/abort`` and its reason."""

    pipe: str
    aborted: bool = False
    reason: str | None = None


async def _outcome(host: StoredChatHost, run: Callable[[], Awaitable[_Ended]]) -> ScriptOutcome:
    """Run ``run`` on ``host`` and gather how it ended (metadata stored whatever happens)."""
    error: ScriptError | None = None
    ended = _Ended("")
    try:
        ended = await run()
    except ScriptError as exc:  # a budget run out included
        error = exc
    finally:
        await host.save_metadata()
    return ScriptOutcome(
        pipe=ended.pipe,
        aborted=ended.aborted,
        abort_reason=ended.reason,
        error=error,
        toasts=tuple(host.toasts),
        shown=tuple(host.shown),
        input_text=host.input_text,
    )
