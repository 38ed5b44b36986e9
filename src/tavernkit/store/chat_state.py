"""Build a :class:`~tavernkit.models.state.ChatState` from a store (any ``Store``
implementation: only protocol calls are used).

Which lorebooks take part follows SillyTavern (reference §1.4): the global selection, the
character's linked book (``data.extensions.world``) and its extra books (``charLore``), the
chat's book (``chat_metadata.world_info``) and the persona's book, each once — a book that is
global is not scanned again as the character's, chat's or persona's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tavernkit.errors import NotFound
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.models.character import Card
from tavernkit.models.chat import Chat, ChatHeader
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.persona import Persona
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.samplers import TextGenSettings
from tavernkit.models.settings import Settings
from tavernkit.models.state import BookScope, ChatState, ScopedBook
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
    builtin_reasoning_template,
)
from tavernkit.store.chat_types import StoredChat, StoredChatWindow
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import SharedRecord
from tavernkit.worldinfo.index import default_engine

__all__ = ["load_chat_state", "load_user_name", "persona_candidates"]

_T = TypeVar("_T")


async def load_chat_state(
    store: Store,
    *,
    owner: str = DEFAULT_OWNER,
    chat_id: str | None = None,
    character: str | None = None,
    persona: str | None = None,
    settings: Settings | None = None,
    window: int | None = None,
    books: bool = True,
) -> ChatState:
    """Gather one turn's inputs. ``character`` and ``persona`` override the chat's and the
    settings' selections; a selection naming a record that no longer exists is ignored (the
    turn runs without it) rather than failing the turn.

    With ``window``, only the chat's newest ``window`` messages (and the oldest up to its first
    visible one) are loaded: the chat's messages are then a
    :class:`~tavernkit.models.chat_window.MessageWindow`, which raises
    :class:`~tavernkit.models.chat_window.OutsideWindow` when a build reads past what was
    loaded (see :func:`tavernkit.chat.prepare.prepare_turn`, which then loads more).

    ``books=False`` leaves the lorebooks out (the state's ``books`` empty, the character's
    links not read): for what evaluates macros without a world-info scan, such as a new
    chat's greetings (SillyTavern scans no world info for them, and ``{{outlet}}`` reads a
    scan's result, which a greeting has none of), so a 20,000-entry book is neither read
    nor parsed to write one greeting."""
    settings, stored_chat, global_variables = await _first_reads(
        store, owner, chat_id, settings, window
    )
    chat = None
    char_ref = character
    if stored_chat is not None:
        chat = stored_chat.to_chat()
        chat_id = stored_chat.info.id
        char_ref = char_ref or stored_chat.info.character_id
    char_ref = char_ref or settings.selections.character

    # The turn's persona, else the one locked to the chat, else the one locked to the chat's
    # character, else the default; a locked or default persona deleted since is skipped.
    locked = chat.metadata.persona if chat is not None else None
    chat_character = stored_chat.info.character_id if stored_chat is not None else char_ref
    personas = persona_candidates(persona, locked, chat_character, settings)
    # every record the state names, in one revision check (two trips when some changed)
    wanted = _wanted(settings, char_ref)
    # the chat's character is named by its id: its linked books are read alongside
    by_id = (
        char_ref
        if books and stored_chat is not None and char_ref == stored_chat.info.character_id
        else None
    )
    refs = [(kind, ref) for kind, ref in wanted.items() if ref]
    shared, linked = await asyncio.gather(
        store.get_shared_records([*refs, *(("persona", ref) for ref in personas)], owner=owner),
        _linked_books(store, by_id, owner),
    )
    found = _Found(shared, wanted)
    card, character_id = _card_of(found, shared, char_ref)

    persona_model = _first_persona(shared, personas)
    scoped: list[ScopedBook] = []
    if books:
        if character_id != by_id:
            linked = await _linked_books(store, character_id, owner)
        scoped = await _collect_books(store, owner, settings, card, linked, chat, persona_model)

    return _state(
        found,
        settings=settings,
        card=card,
        persona=persona_model,
        books=scoped,
        chat=chat,
        chat_id=chat_id,
        character_id=character_id,
        global_variables=global_variables,
    )


def _card_of(
    found: _Found, shared: Mapping[tuple[str, str], SharedRecord], ref: str | None
) -> tuple[Card | None, str | None]:
    """The state's card and its record id (``None`` for both when none is read)."""
    card = found.model("character")
    if not isinstance(card, Card):
        return None, None
    return card, shared[("character", ref or "")].id


def _state(
    found: _Found,
    *,
    settings: Settings,
    card: Card | None,
    persona: Persona | None,
    books: list[ScopedBook],
    chat: Chat | None,
    chat_id: str | None,
    character_id: str | None,
    global_variables: dict[str, Any],
) -> ChatState:
    """The state from what was read: the records by kind, and the chat with its ids."""
    return ChatState(
        settings=settings,
        card=card,
        persona=persona,
        user_name=_user_name(persona, settings),
        books=books,
        chat_preset=_typed(found.model("chat_preset"), ChatCompletionPreset),
        chat_preset_id=found.record_id("chat_preset"),
        textgen_preset=_typed(found.model("textgen_preset"), TextGenSettings),
        textgen_preset_id=found.record_id("textgen_preset"),
        instruct=_typed(found.model("instruct"), InstructTemplate),
        context=_typed(found.model("context"), ContextTemplate),
        sysprompt=_typed(found.model("sysprompt"), SystemPrompt),
        reasoning=_reasoning_template(found.model("reasoning"), settings.reasoning.template),
        profile=_typed(found.model("connection_profile"), ConnectionProfile),
        chat=chat,
        chat_id=chat_id,
        character_id=character_id,
        character_filename=card.data.name if card is not None else None,
        global_variables=global_variables,
    )


async def _first_reads(
    store: Store,
    owner: str,
    chat_id: str | None,
    settings: Settings | None,
    window: int | None,
) -> tuple[Settings, StoredChat | StoredChatWindow | None, dict[str, Any]]:
    """The reads that depend on nothing, out together (one wait for the three, not three
    waits in a row): the settings, the chat (its window), the global variables."""
    stored_chat: StoredChat | StoredChatWindow | None
    if settings is None and chat_id is not None and window is not None:
        start = await store.load_turn_start(chat_id, last=window, owner=owner)
        stored_settings, stored_chat = start.settings, start.window
        global_variables = start.global_variables
    else:
        stored_settings, stored_chat, global_variables = await asyncio.gather(
            store.get_settings(owner=owner) if settings is None else _given(settings),
            _load_chat(store, chat_id, window, owner),
            store.get_global_variables(owner=owner),
        )
    settings = stored_settings if isinstance(stored_settings, Settings) else Settings()
    return settings, stored_chat, global_variables


def _wanted(settings: Settings, char_ref: str | None) -> dict[str, str | None]:
    """Every record the state names, by kind: the character, the selected presets and
    templates, the reasoning template and the connection profile."""
    sel = settings.selections
    prompt = settings.prompt
    return {
        "character": char_ref,
        "chat_preset": sel.chat_preset,
        "textgen_preset": sel.textgen_preset,
        "instruct": prompt.instruct_template,
        "context": prompt.context_template,
        "sysprompt": prompt.sysprompt,
        "reasoning": settings.reasoning.template,
        "connection_profile": sel.profile,
    }


@dataclass(frozen=True, slots=True)
class _Found:
    """The records the state names, as the shared read found them."""

    shared: Mapping[tuple[str, str], Any]
    wanted: Mapping[str, str | None]

    def model(self, kind: str) -> Any:
        found = self.shared.get((kind, self.wanted[kind] or ""))
        return found.model if found is not None else None

    def record_id(self, kind: str) -> str | None:
        found = self.shared.get((kind, self.wanted[kind] or ""))
        return found.id or None if found is not None else None


def _reasoning_template(stored: Any, name: str) -> ReasoningTemplate | None:
    """The user's template of that name, else the one SillyTavern ships under it: a fresh
    SillyTavern home has its default templates, so auto-parse works before any import."""
    own = _typed(stored, ReasoningTemplate)
    return own if own is not None else builtin_reasoning_template(name)


async def _given(value: _T) -> _T:
    return value


async def _load_chat(
    store: Store, chat_id: str | None, window: int | None, owner: str
) -> StoredChat | StoredChatWindow | None:
    if chat_id is None:
        return None
    if window is not None:
        return await store.load_chat_window(chat_id, last=window, owner=owner)
    return await store.load_chat(chat_id, owner=owner)


async def _linked_books(store: Store, character_id: str | None, owner: str) -> list[str]:
    """The names of the books linked to the character (none for no character, or one that
    no longer exists)."""
    if character_id is None:
        return []
    try:
        return [
            i.name for i in await store.links("character", character_id, "lorebook", owner=owner)
        ]
    except NotFound:
        return []


def persona_candidates(
    turn: str | None, locked: str | None, character_id: str | None, settings: Settings
) -> list[str]:
    """The persona refs a turn may speak as, best first: the turn's own, the one locked to the
    chat, the one locked to the chat's character, the default (SillyTavern's chat lock >
    character lock > default)."""
    sel = settings.selections
    by_character = sel.character_personas.get(character_id) if character_id else None
    return [r for r in dict.fromkeys((turn, locked, by_character, sel.persona)) if r]


def _first_persona(
    shared: Mapping[tuple[str, str], SharedRecord], refs: list[str]
) -> Persona | None:
    for ref in refs:
        found = shared.get(("persona", ref))
        if found is not None and isinstance(found.model, Persona):
            return found.model
    return None


def _user_name(persona: Persona | None, settings: Settings) -> str:
    """The name the user's messages go under: the persona's, else the settings'."""
    return persona.name if persona is not None and persona.name else settings.selections.user_name


async def load_user_name(
    store: Store, chat_id: str, *, owner: str = DEFAULT_OWNER, persona: str | None = None
) -> str:
    """The name the user's messages in ``chat_id`` are stored under (the persona's: the turn's,
    else the one locked to the chat, else the one locked to its character, else the default;
    else the settings'): what storing a typed message needs, without loading the chat's
    messages, card or books."""
    stored = await store.get_settings(owner=owner)
    settings = stored if isinstance(stored, Settings) else Settings()
    locked = character_id = None
    if persona is None:
        window = await store.load_chat_window(chat_id, last=1, owner=owner)
        locked = ChatHeader.model_validate(window.header).chat_metadata.persona
        character_id = window.info.character_id
    refs = persona_candidates(persona, locked, character_id, settings)
    shared = await store.get_shared_records([("persona", ref) for ref in refs], owner=owner)
    return _user_name(_first_persona(shared, refs), settings)


def _typed(value: Any, cls: type[_T]) -> _T | None:
    return value if isinstance(value, cls) else None


async def _collect_books(
    store: Store,
    owner: str,
    settings: Settings,
    card: Card | None,
    linked: list[str],
    chat: Any,
    persona: Persona | None,
) -> list[ScopedBook]:
    wi = settings.world_info
    global_names = list(dict.fromkeys(wi.global_books))
    chat_book = chat.metadata.world_info if chat is not None else None
    persona_book = persona.lorebook if persona is not None else None

    wanted: list[tuple[str, BookScope]] = [(name, "global") for name in global_names]
    if card is not None:
        own: list[str] = []
        if card.data.world:
            own.append(card.data.world)
        own.extend(linked)
        for name in dict.fromkeys(own):
            if name not in global_names and name not in (chat_book, persona_book):
                wanted.append((name, "character"))
        for lore in wi.char_lore:
            if lore.name == card.data.name:
                for name in lore.extra_books:
                    if name not in global_names and name not in (chat_book, persona_book):
                        wanted.append((name, "character_extra"))
    if isinstance(chat_book, str) and chat_book and chat_book not in global_names:
        wanted.append((chat_book, "chat"))
    if persona_book and persona_book not in global_names and persona_book != chat_book:
        wanted.append((persona_book, "persona"))

    scopes: dict[str, BookScope] = {}
    for name, scope in wanted:
        scopes.setdefault(name, scope)  # a book is scanned once, in its first scope
    records = await store.get_shared_records([("lorebook", name) for name in scopes], owner=owner)
    books: list[ScopedBook] = []
    for name, scope in scopes.items():
        book = _lorebook(records.get(("lorebook", name)))
        if book is not None:
            books.append(ScopedBook(name=name, scope=scope, book=book))
    return books


def _lorebook(record: SharedRecord | None) -> Lorebook | None:
    """The shared model of a lorebook, vouched for to the world-info engine: a book it has
    not compiled yet is compiled from the stored JSON, found by that JSON's hash."""
    if record is None or not isinstance(record.model, Lorebook):
        return None
    books = default_engine().books
    if not books.knows(record.model):
        books.register(record.model, record.digest, record.data)
    return record.model
