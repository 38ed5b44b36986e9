"""Quick Reply sets as a script (and the quick-reply bar) sees them.

A :class:`QuickReplyLibrary` holds every set of the user (``sets``, kept sorted by name as
SillyTavern keeps ``QuickReplySet.list``) and three binding lists, each of
``{set, isVisible}`` links in order: the global list (``extension_settings.quickReplyV2.config``),
the chat's (``chat_metadata.quickReply``) and the character's (sets a card brings: its
``data.extensions.quick_reply_sets``, names or whole set objects). The bar shows the global
sets, then the chat's, then the character's.

What a button does (:func:`click_text`) follows SillyTavern: with ``injectInput`` the reply is
joined to what is typed (``input + " " + qr``, or ``qr + " " + input`` with
``placeBeforeInput``), otherwise a space is appended; text starting with ``/`` (and a set
without ``disableSend``) runs as a script, anything else goes into the input box and is sent
unless the set has ``disableSend``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.models.quick_reply import QuickReply, QuickReplySet

__all__ = [
    "QuickReplyLibrary",
    "SetLink",
    "click_text",
    "link_list",
    "links_from_json",
    "menu_reply",
]


@dataclass(slots=True)
class SetLink:
    """One entry of a binding list."""

    name: str
    visible: bool = True

    def st_json(self) -> dict[str, Any]:
        return {"set": self.name, "isVisible": self.visible}


def links_from_json(value: Any) -> list[SetLink]:
    """A binding list from SillyTavern's ``{setList: [{set, isVisible}]}`` (or the list)."""
    if isinstance(value, Mapping):
        value = value.get("setList")
    links: list[SetLink] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            links.append(SetLink(item))
        elif isinstance(item, Mapping) and isinstance(item.get("set"), str):
            links.append(SetLink(item["set"], bool(item.get("isVisible", True))))
    return links


def link_list(links: Iterable[SetLink]) -> dict[str, Any]:
    return {"setList": [link.st_json() for link in links]}


@dataclass
class QuickReplyLibrary:
    """Every set, and which are bound globally, to the chat and to the character."""

    sets: list[QuickReplySet] = field(default_factory=list)
    global_links: list[SetLink] = field(default_factory=list)
    chat_links: list[SetLink] = field(default_factory=list)
    character_links: list[SetLink] = field(default_factory=list)

    # -- sets -------------------------------------------------------------------------------

    def get(self, name: str) -> QuickReplySet | None:
        return next((s for s in self.sets if s.name == name), None)

    def add_set(self, qr_set: QuickReplySet) -> QuickReplySet:
        """Add ``qr_set`` (replacing a set of that name in place, else sorted by name)."""
        old = self.get(qr_set.name)
        if old is not None:
            self.sets[self.sets.index(old)] = qr_set
            return qr_set
        key = qr_set.name.lower()
        index = next((i for i, s in enumerate(self.sets) if s.name.lower() > key), None)
        if index is None:
            self.sets.append(qr_set)
        else:
            self.sets.insert(index, qr_set)
        return qr_set

    def create_set(
        self,
        name: str,
        *,
        disable_send: bool = False,
        place_before_input: bool = False,
        inject_input: bool = False,
    ) -> QuickReplySet:
        """``/qr-set-create``: a new empty set (an existing one of that name is replaced)."""
        qr_set = QuickReplySet.create(
            name=name,
            disable_send=disable_send,
            place_before_input=place_before_input,
            inject_input=inject_input,
        )
        return self.add_set(qr_set)

    def delete_set(self, name: str) -> bool:
        qr_set = self.get(name)
        if qr_set is None:
            return False
        self.sets.remove(qr_set)
        for links in (self.global_links, self.chat_links, self.character_links):
            links[:] = [link for link in links if link.name != name]
        return True

    def import_set(self, data: Mapping[str, Any] | str) -> QuickReplySet:
        """A set from an exported file (its JSON text or object), added by name."""
        raw = json.loads(data) if isinstance(data, str) else dict(data)
        return self.add_set(QuickReplySet.model_validate(raw))

    # -- bindings ---------------------------------------------------------------------------

    def active_links(self) -> Iterator[SetLink]:
        yield from self.global_links
        yield from self.chat_links
        yield from self.character_links

    def active_sets(self) -> list[QuickReplySet]:
        out: list[QuickReplySet] = []
        for link in self.active_links():
            qr_set = self.get(link.name)
            if qr_set is not None:
                out.append(qr_set)
        return out

    @staticmethod
    def bind(links: list[SetLink], name: str, *, visible: bool = True) -> None:
        if all(link.name != name for link in links):
            links.append(SetLink(name, visible))
        else:
            for link in links:
                if link.name == name:
                    link.visible = visible

    @staticmethod
    def unbind(links: list[SetLink], name: str) -> None:
        links[:] = [link for link in links if link.name != name]

    @staticmethod
    def toggle(links: list[SetLink], name: str, *, visible: bool = True) -> None:
        if any(link.name == name for link in links):
            QuickReplyLibrary.unbind(links, name)
        else:
            links.append(SetLink(name, visible))

    # -- finding replies --------------------------------------------------------------------

    def find_by_name(self, name: str) -> tuple[QuickReplySet, QuickReply] | None:
        """``executeQuickReplyByName``: a label in the bound sets, else ``Set.Label``."""
        for qr_set in self.active_sets():
            for reply in qr_set.qr_list:
                if reply.label == name:
                    return qr_set, reply
        set_name, _, label = name.partition(".")
        found = self.get(set_name)
        if found is not None:
            labelled = found.find(label)
            if labelled is not None:
                return found, labelled
        return None

    def by_index(self, index: int) -> tuple[QuickReplySet, QuickReply] | None:
        """``/qr N``: the N-th reply over the global, then the chat sets."""
        position = 0
        for link in (*self.global_links, *self.chat_links):
            qr_set = self.get(link.name)
            if qr_set is None:
                continue
            for reply in qr_set.qr_list:
                if position == index:
                    return qr_set, reply
                position += 1
        return None


def click_text(qr_set: QuickReplySet, reply: QuickReply, typed: str) -> str:
    """The text a button click works with: the reply joined to the typed input as
    ``injectInput``/``placeBeforeInput`` say, else the reply and a space."""
    if qr_set.inject_input and typed:
        if qr_set.place_before_input:
            return f"{reply.message} {typed}"
        return f"{typed} {reply.message}"
    return f"{reply.message} "


_PARENT = re.compile(r"%%parent(-\d+)?%%")


def menu_reply(parent: QuickReply, item: QuickReply, item_set: str) -> QuickReply:
    """``item`` as picked from ``parent``'s context menu (SillyTavern's ``ContextMenu.build``):
    when the link that lists ``item_set`` is chained (``isChained``), ``parent``'s message runs
    first, piped into the item's (``parent | item``, only when both have one);
    ``%%parent%%`` (and ``%%parent-N%%``: one menu level up here, so the same) becomes
    ``parent``'s label, chained or not."""
    chained = any(link.set == item_set and link.is_chained for link in parent.context_list)
    message = item.message
    if chained and parent.message and message:
        message = f"{parent.message} | {message}"
    message = _PARENT.sub(lambda _: parent.label, message)
    return item.model_copy(update={"message": message})
