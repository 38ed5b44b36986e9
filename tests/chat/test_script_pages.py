"""``ChatPages``: a chat's messages at their absolute indexes, of which only the ones read are
held; inserts and deletes move the later ones as a list would, and reading one not read is an
error, never a guess."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tavernkit.chat.script_pages import ChatPages, runs
from tavernkit.errors import OutsideWindow
from tavernkit.store.chat_types import StoredMessage

CHAT = [StoredMessage(id=f"id{i}", position=i, data={"mes": f"m{i}"}) for i in range(50)]


def _pages(asked: list[tuple[int, int]]) -> ChatPages:
    async def read(start: int, stop: int) -> Sequence[StoredMessage]:
        asked.append((start, stop))
        return CHAT[start:stop]

    pages = ChatPages(len(CHAT), read)
    pages.hold(45, CHAT[45:])
    return pages


async def test_only_the_missing_messages_are_read_and_an_unread_one_is_an_error() -> None:
    asked: list[tuple[int, int]] = []
    pages = _pages(asked)
    assert len(pages) == 50 and pages[-1] == {"mes": "m49"}
    with pytest.raises(OutsideWindow):
        pages[44]
    await pages.load(2, 4)
    await pages.load(0, 47)  # the gaps either side of 2-3, nothing held read again
    assert asked == [(2, 4), (0, 2), (4, 45)]
    assert [m["mes"] for m in pages[0:3]] == ["m0", "m1", "m2"]
    assert pages.loaded == 50


async def test_inserts_and_drops_move_the_later_messages_with_their_ids() -> None:
    pages = _pages([])
    pages.insert(46, {"mes": "new"})
    pages.set_id(46, "fresh")
    assert len(pages) == 51
    assert pages[46]["mes"] == "new"
    assert (pages.message_id(46), pages.message_id(47)) == ("fresh", "id46")
    pages.append({"mes": "last"})
    assert pages[51] == {"mes": "last"} and len(pages) == 52
    pages.drop(45, 2)
    assert [m["mes"] for m in pages[45:]] == ["m46", "m47", "m48", "m49", "last"]
    assert pages.message_id(45) == "id46"
    with pytest.raises(OutsideWindow):
        pages[44]
    with pytest.raises(IndexError):
        pages[50]


def test_runs_are_the_consecutive_indexes() -> None:
    assert runs([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 1), (9, 2)]
    assert runs([]) == []
