"""Which Quick Reply sets a chat shows, and binding sets to a chat or a character.

A user's sets are ``quick_reply_set`` records (SillyTavern's export shape). Three lists say
which are on the quick-reply bar, in this order:

- global: ``settings.selections.quick_reply_sets`` (names, in order), SillyTavern's
  ``extension_settings.quickReplyV2.config``;
- the chat's: SillyTavern's ``chat_metadata.quickReply`` (``{setList: [{set, isVisible}]}``);
- the character's: the card's ``data.extensions.quick_reply_sets``, a list of set names or of
  whole exported sets (a card that carries its own buttons). SillyTavern 1.18 keeps no such key
  in a card; it is tavernkit's, so a card brings its sets along and a user binds sets to a
  character through the API (:meth:`QuickReplyBindings.bind_character`). A whole set a card
  carries is shown (and run) as it is in the card until the user has a set of that name.

:func:`load_library` gathers the sets and the three lists for a chat (what a script on that
chat and the bar see); :class:`QuickReplyBindings` answers the bar of a chat and changes the
chat's and the character's lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.errors import FormatError
from tavernkit.models.character import Card
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.protocol import Store
from tavernkit.stscript.quick_replies import QuickReplyLibrary, SetLink, link_list, links_from_json

__all__ = ["QR_KIND", "BarSet", "QuickReplyBindings", "card_set_links", "load_library"]

QR_KIND = "quick_reply_set"
#: the card key that binds sets to a character (names or whole sets)
CARD_KEY = "quick_reply_sets"


async def stored_sets(store: Store, owner: str) -> list[QuickReplySet]:
    """Every Quick Reply set of ``owner``."""
    out = []
    for info in await store.list(QR_KIND, owner=owner):
        record = await store.get_record(QR_KIND, info.id, owner=owner)
        out.append(QuickReplySet.model_validate(record.data))
    return out


def card_set_links(library: QuickReplyLibrary, extensions: Any) -> list[SetLink]:
    """The character's list from a card's extensions; whole sets it carries are added to
    ``library`` when the user has none of that name."""
    embedded = extensions.get(CARD_KEY) if isinstance(extensions, Mapping) else None
    links: list[SetLink] = []
    for item in embedded if isinstance(embedded, list) else []:
        if isinstance(item, str):
            links.append(SetLink(item))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            if library.get(item["name"]) is None:
                library.add_set(QuickReplySet.model_validate(dict(item)))
            links.append(SetLink(item["name"]))
    return links


async def load_library(
    store: Store, owner: str, state: ChatState | None, metadata: Mapping[str, Any] | None
) -> QuickReplyLibrary:
    """The sets of ``owner`` and the global, chat (``metadata``: the chat's
    ``chat_metadata``) and character (``state``'s card) lists."""
    library = QuickReplyLibrary()
    for qr_set in await stored_sets(store, owner):
        library.add_set(qr_set)
    settings = state.settings if state is not None else Settings()
    names = list(getattr(settings.selections, "quick_reply_sets", []) or [])
    library.global_links = [SetLink(name) for name in names]
    library.chat_links = links_from_json((metadata or {}).get("quickReply"))
    character = state.character if state is not None else None
    library.character_links = card_set_links(library, getattr(character, "extensions", None))
    return library


@dataclass(frozen=True, slots=True)
class BarSet:
    """One set on a chat's bar: where it is bound and whether it is shown."""

    scope: str  # "global", "chat" or "character"
    visible: bool
    set: QuickReplySet

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "visible": self.visible, **self.set.st_json()}


class QuickReplyBindings:
    """The quick-reply bar of a chat and the chat's and characters' bindings, for ``owner``."""

    def __init__(self, store: Store, owner: str) -> None:
        self.store = store
        self.owner = owner

    async def _chat(self, chat_id: str) -> tuple[ChatState, dict[str, Any]]:
        state = await load_chat_state(self.store, owner=self.owner, chat_id=chat_id, window=1)
        metadata: dict[str, Any] = {}
        if state.chat is not None:
            metadata = state.chat.metadata.model_dump(by_alias=True, exclude_none=True)
        return state, metadata

    async def library(self, chat_id: str) -> QuickReplyLibrary:
        state, metadata = await self._chat(chat_id)
        return await load_library(self.store, self.owner, state, metadata)

    async def bar(self, chat_id: str) -> list[BarSet]:
        """The sets bound globally, to the chat and to its character, in that order (a set
        bound twice shows once, where it is first bound); a bound set that does not exist is
        left out."""
        library = await self.library(chat_id)
        out: list[BarSet] = []
        seen: set[str] = set()
        for scope, links in (
            ("global", library.global_links),
            ("chat", library.chat_links),
            ("character", library.character_links),
        ):
            for link in links:
                qr_set = library.get(link.name)
                if qr_set is None or link.name in seen:
                    continue
                seen.add(link.name)
                out.append(BarSet(scope, link.visible, qr_set))
        return out

    async def bindings(self, chat_id: str) -> dict[str, list[str]]:
        """Every set's name (``sets``) and the three lists (``global``, ``chat``,
        ``character``) of a chat, by name."""
        library = await self.library(chat_id)
        return {
            "sets": [s.name for s in library.sets],
            "global": [link.name for link in library.global_links],
            "chat": [link.name for link in library.chat_links],
            "character": [link.name for link in library.character_links],
        }

    async def bind_global(self, names: Sequence[str]) -> list[str]:
        """Make ``names`` the global list (every chat's bar)."""
        await self._existing(names)
        settings = await self.store.get_settings(owner=self.owner)
        value = settings if isinstance(settings, Settings) else Settings()
        value.selections.quick_reply_sets = list(names)
        await self.store.put_settings(value, owner=self.owner)
        return list(names)

    async def linked(
        self, chat_id: str, bar: Sequence[BarSet] | None = None
    ) -> list[QuickReplySet]:
        """The sets the bar's replies open as context menus (their ``contextList``), that
        exist and are not on the bar already."""
        library = await self.library(chat_id)
        shown = bar if bar is not None else await self.bar(chat_id)
        names = {item.set.name for item in shown}
        out: list[QuickReplySet] = []
        for item in shown:
            for reply in item.set.qr_list:
                for link in reply.context_list:
                    found = library.get(link.set)
                    if found is not None and found.name not in names:
                        names.add(found.name)
                        out.append(found)
        return out

    async def _existing(self, names: Sequence[str], also: Iterable[str] = ()) -> None:
        """Every name a stored set's (or one of ``also``); a 422 naming the first that is not."""
        known = {s.name for s in await stored_sets(self.store, self.owner)} | set(also)
        for index, name in enumerate(names):
            if name not in known:
                raise FormatError(f"no Quick Reply set named {name!r}", field=f"sets[{index}]")

    async def bind_chat(self, chat_id: str, links: Sequence[SetLink]) -> list[SetLink]:
        """Make ``links`` the chat's list (SillyTavern's ``chat_metadata.quickReply``)."""
        await self._existing([link.name for link in links])
        stored = await self.store.load_chat(chat_id, owner=self.owner)
        metadata = dict(stored.header.get("chat_metadata") or {})
        metadata["quickReply"] = link_list(links)
        await self.store.update_chat_metadata(stored.info.id, metadata, owner=self.owner)
        return list(links)

    async def character_sets(self, character: str) -> list[str]:
        record = await self.store.get_record("character", character, owner=self.owner)
        card = Card.model_validate(record.data)
        return [link.name for link in card_set_links(QuickReplyLibrary(), card.data.extensions)]

    async def bind_character(self, character: str, names: Sequence[str]) -> list[str]:
        """Make ``names`` the character's list (kept in its card, so an export carries it); a
        set the card carries whole stays in it."""
        record = await self.store.get_record("character", character, owner=self.owner)
        data = dict(record.data)
        inner = dict(data.get("data") or {})
        extensions = dict(inner.get("extensions") or {})
        carried = {
            item["name"]: item
            for item in extensions.get(CARD_KEY) or []
            if isinstance(item, Mapping) and isinstance(item.get("name"), str)
        }
        await self._existing(names, also=carried)
        extensions[CARD_KEY] = [carried.get(name, name) for name in names]
        inner["extensions"] = extensions
        data["data"] = inner
        await self.store.put(
            "character",
            Card.model_validate(data),
            owner=self.owner,
            name=record.info.name,
            id=record.info.id,
        )
        return list(names)
