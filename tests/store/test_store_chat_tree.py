"""A chat as a tree, on SQLite and PostgreSQL: a fork keeps what followed the fork point
reachable, switching paths restores each path exactly (ids, swipes, order), every read of the
current path (whole, window, range, counts) sees only it, and a cut of the path trims the
branches that continued the deleted messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import FormatError, NotFound
from tavernkit.store import Store, open_postgres_store
from tavernkit.store.admin import copy_store
from tavernkit.store.sqlite import open_store as open_sqlite_store

HEADER: dict[str, Any] = {"user_name": "Ada", "character_name": "Mira", "chat_metadata": {}}


def _msg(i: int, text: str | None = None) -> dict[str, Any]:
    user = i % 2 == 1
    mes = text if text is not None else f"message {i}"
    out: dict[str, Any] = {"name": "Ada" if user else "Mira", "is_user": user, "mes": mes}
    if not user:
        out |= {"swipe_id": 0, "swipes": [mes, f"{mes} (alt)"], "swipe_info": [{}, {"x": i}]}
    return out


async def _chat(store: Store, count: int = 6) -> str:
    info = await store.create_chat(HEADER, [_msg(i) for i in range(count)], name="tree")
    return info.id


async def _path(store: Store, chat_id: str) -> list[str]:
    return [m.data["mes"] for m in (await store.load_chat(chat_id)).messages]


async def test_a_chat_that_never_branched_is_one_branch_and_reads_as_before(store: Store) -> None:
    chat_id = await _chat(store)
    before = await store.load_chat(chat_id)
    tree = await store.chat_tree(chat_id)
    assert tree.current == "main"
    assert [(b.id, b.parent, b.fork, b.length, b.on_path) for b in tree.branches] == [
        ("main", None, 0, 6, True)
    ]
    assert tree.branches[0].first == before.messages[0].data
    await store.switch_branch(chat_id, "main")  # already current: nothing moves
    assert await store.load_parked(chat_id) == {}
    assert await store.load_chat(chat_id) == before
    with pytest.raises(NotFound, match="no branch 'nope'"):
        await store.switch_branch(chat_id, "nope")


async def test_a_fork_parks_the_rest_and_switching_back_restores_it_exactly(store: Store) -> None:
    chat_id = await _chat(store)
    before = await store.load_chat(chat_id)
    branch = await store.fork_chat(chat_id, 4)
    assert await _path(store, chat_id) == [f"message {i}" for i in range(4)]
    assert (await store.get_chat_info(chat_id)).message_count == 4
    await store.append_messages(chat_id, [_msg(4, "new 4"), _msg(5, "new 5"), _msg(6, "new 6")])

    tree = await store.chat_tree(chat_id)
    assert tree.current == branch
    by_id = {b.id: b for b in tree.branches}
    assert [b.id for b in tree.branches] == ["main", branch]
    assert (by_id["main"].fork, by_id["main"].length, by_id["main"].on_path) == (0, 6, True)
    assert (by_id[branch].parent, by_id[branch].fork, by_id[branch].length) == ("main", 4, 3)
    assert by_id[branch].first is not None and by_id[branch].first["mes"] == "new 4"
    assert by_id["main"].at_forks == {4: before.messages[4].data}  # what the branch replaces
    assert by_id[branch].at_forks == {}
    parked = await store.load_parked(chat_id)
    assert [m.data["mes"] for m in parked["main"]] == ["message 4", "message 5"]

    await store.switch_branch(chat_id, "main")
    after = await store.load_chat(chat_id)
    assert after.messages == before.messages  # ids, swipes, swipe_info, positions
    assert after.header == before.header
    tree = await store.chat_tree(chat_id)
    assert tree.current == "main"
    assert {b.id: b.on_path for b in tree.branches} == {"main": True, branch: False}
    assert {b.id: b.length for b in tree.branches} == {"main": 6, branch: 3}
    assert tree.branches[1].first is not None and tree.branches[1].first["mes"] == "new 4"
    assert tree.branches[0].at_forks == {4: before.messages[4].data}

    await store.switch_branch(chat_id, branch)
    assert await _path(store, chat_id) == [
        *(f"message {i}" for i in range(4)),
        "new 4",
        "new 5",
        "new 6",
    ]


async def test_reads_of_the_current_path_see_only_it(store: Store) -> None:
    chat_id = await _chat(store, 8)
    await store.fork_chat(chat_id, 3)
    await store.append_message(chat_id, _msg(3, "other 3"))
    window = await store.load_chat_window(chat_id, last=2)
    assert [m.data["mes"] for m in window.tail] == ["message 2", "other 3"]
    assert window.info.message_count == 4
    rows = await store.load_message_range(chat_id, start=2, stop=10)
    assert [(m.position, m.data["mes"]) for m in rows] == [(2, "message 2"), (3, "other 3")]
    hits = await store.search_messages("message 6")
    assert hits.total == 0  # a parked message is not on the chat's path


async def test_nested_and_sibling_branches_switch_to_each_path(store: Store) -> None:
    chat_id = await _chat(store, 6)
    a = await store.fork_chat(chat_id, 2)
    await store.append_messages(chat_id, [_msg(2, "a2"), _msg(3, "a3"), _msg(4, "a4")])
    b = await store.fork_chat(chat_id, 4)  # inside a: a's a4 is parked
    await store.append_message(chat_id, _msg(4, "b4"))
    c = await store.fork_chat(chat_id, 2)  # a sibling of a, off main
    await store.append_message(chat_id, _msg(2, "c2"))
    head = ["message 0", "message 1"]
    paths = {
        "main": [*head, "message 2", "message 3", "message 4", "message 5"],
        a: [*head, "a2", "a3", "a4"],
        b: [*head, "a2", "a3", "b4"],
        c: [*head, "c2"],
    }
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.parent, x.fork) for x in tree.branches} == {
        "main": (None, 0),
        a: ("main", 2),
        b: (a, 4),
        c: ("main", 2),
    }
    for target in ("main", b, c, a, b, "main", c):
        await store.switch_branch(chat_id, target)
        assert await _path(store, chat_id) == paths[target], target
        tree = await store.chat_tree(chat_id)
        assert tree.current == target
        assert {x.id: x.length for x in tree.branches} == {"main": 6, a: 3, b: 1, c: 1}
        at_forks = {x.id: {k: v["mes"] for k, v in x.at_forks.items()} for x in tree.branches}
        assert at_forks == {"main": {2: "message 2"}, a: {4: "a4"}, b: {}, c: {}}
        assert {x.id: x.first and x.first["mes"] for x in tree.branches} == {
            "main": "message 0",
            a: "a2",
            b: "b4",
            c: "c2",
        }


async def test_a_fork_must_start_inside_the_path(store: Store) -> None:
    chat_id = await _chat(store, 4)
    for bad in (0, 4, 9, -1):
        with pytest.raises(FormatError) as caught:
            await store.fork_chat(chat_id, bad)
        assert caught.value.field == "index"
    with pytest.raises(NotFound):
        await store.fork_chat("no-such-chat", 1)
    assert await store.load_parked(chat_id) == {}


async def test_deleting_the_new_reply_keeps_the_branch_and_the_old_continuation(
    store: Store,
) -> None:
    chat_id = await _chat(store, 6)
    branch = await store.fork_chat(chat_id, 4)
    await store.append_message(chat_id, _msg(4, "new 4"))
    await store.truncate_chat(chat_id, 4)  # what a regenerate of the new reply does first
    tree = await store.chat_tree(chat_id)
    assert tree.current == branch
    assert {b.id: b.length for b in tree.branches} == {"main": 6, branch: 0}
    await store.append_message(chat_id, _msg(4, "newer 4"))
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == [f"message {i}" for i in range(6)]


async def test_a_cut_before_a_fork_drops_the_branches_that_continued_it(store: Store) -> None:
    chat_id = await _chat(store, 6)
    await store.fork_chat(chat_id, 4)
    await store.append_message(chat_id, _msg(4, "new 4"))
    await store.truncate_chat(chat_id, 3)
    # main's parked 4 and 5 followed the deleted message 3: they go, and so does the branch
    tree = await store.chat_tree(chat_id)
    assert tree.current == "main"
    assert [(b.id, b.length) for b in tree.branches] == [("main", 3)]
    assert await store.load_parked(chat_id) == {}


async def test_a_cut_after_a_fork_keeps_the_other_path(store: Store) -> None:
    chat_id = await _chat(store, 6)
    branch = await store.fork_chat(chat_id, 2)
    await store.append_messages(chat_id, [_msg(2, "b2"), _msg(3, "b3"), _msg(4, "b4")])
    await store.truncate_chat(chat_id, 3)
    assert await _path(store, chat_id) == ["message 0", "message 1", "b2"]
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == [f"message {i}" for i in range(6)]
    assert {b.id: b.length for b in (await store.chat_tree(chat_id)).branches} == {
        "main": 6,
        branch: 1,
    }


async def test_switching_away_from_an_empty_branch_drops_it(store: Store) -> None:
    chat_id = await _chat(store, 4)
    await store.fork_chat(chat_id, 2)  # never got a message (a turn that failed)
    await store.switch_branch(chat_id, "main")
    tree = await store.chat_tree(chat_id)
    assert [b.id for b in tree.branches] == ["main"]
    assert await _path(store, chat_id) == [f"message {i}" for i in range(4)]


async def test_deleting_a_chat_deletes_its_tree(store: Store) -> None:
    chat_id = await _chat(store, 4)
    await store.fork_chat(chat_id, 2)
    await store.delete_chat(chat_id)
    with pytest.raises(NotFound):
        await store.chat_tree(chat_id)
    other = await _chat(store, 4)
    assert [b.id for b in (await store.chat_tree(other)).branches] == ["main"]


async def test_parked_messages_count_toward_the_owners_storage(store: Store) -> None:
    empty = await store.storage_used()
    chat_id = await _chat(store, 6)
    unbranched = await store.storage_used()
    await store.fork_chat(chat_id, 2)  # the tail parks: it still counts
    parked = await store.storage_used()
    assert parked > unbranched - (unbranched - empty) // 2
    await store.switch_branch(chat_id, "main")  # back, and the empty branch goes
    assert await store.storage_used() == unbranched
    await store.fork_chat(chat_id, 2)
    await store.append_messages(chat_id, [_msg(2, "x" * 5000)])
    assert await store.storage_used() > unbranched + 5000
    await store.switch_branch(chat_id, "main")
    assert await store.storage_used() > unbranched + 5000  # the branch's reply, parked
    await store.truncate_chat(chat_id, 1)  # drops every branch past message 0
    await store.delete_chat(chat_id)
    assert await store.storage_used() == empty
    again = await _chat(store, 6)
    await store.fork_chat(again, 3)
    await store.delete_chat(again)  # a chat with parked messages goes whole
    assert await store.storage_used() == empty


async def test_a_tree_copies_to_postgresql_and_back(postgres_url: str, tmp_path: Path) -> None:
    lite = await open_sqlite_store(tmp_path / "a" / "tavernkit.db")
    pg = await open_postgres_store(postgres_url, key_dir=tmp_path / "pg-keys")
    back = await open_sqlite_store(tmp_path / "b" / "tavernkit.db")
    try:
        chat_id = await _chat(lite, 6)
        branch = await lite.fork_chat(chat_id, 3)
        await lite.append_message(chat_id, _msg(3, "other 3"))
        await copy_store(lite, pg)
        await copy_store(pg, back)
        for copy in (pg, back):
            assert await copy.chat_tree(chat_id) == await lite.chat_tree(chat_id)
            assert await copy.load_parked(chat_id) == await lite.load_parked(chat_id)
            assert await copy.storage_used() == await lite.storage_used()
            await copy.switch_branch(chat_id, "main")
            assert await _path(copy, chat_id) == [f"message {i}" for i in range(6)]
            await copy.switch_branch(chat_id, branch)
            assert (await _path(copy, chat_id))[-1] == "other 3"
    finally:
        for s in (lite, pg, back):
            await s.close()


async def test_removing_a_middle_message_moves_every_path_up(store: Store) -> None:
    chat_id = await _chat(store, 8)
    before = await store.load_chat(chat_id)
    a = await store.fork_chat(chat_id, 5)
    await store.append_messages(chat_id, [_msg(5, "a5"), _msg(6, "a6")])
    b = await store.fork_chat(chat_id, 2)  # a sibling before the deleted message: untouched
    await store.append_message(chat_id, _msg(2, "b2"))
    await store.switch_branch(chat_id, a)

    assert await store.remove_messages(chat_id, 3, 1) == 1
    after = await store.load_chat(chat_id)
    assert [m.data["mes"] for m in after.messages] == [
        "message 0",
        "message 1",
        "message 2",
        "message 4",
        "a5",
        "a6",
    ]
    assert [m.position for m in after.messages] == list(range(6))
    assert after.messages[3].id == before.messages[4].id  # moved up, not re-added
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.parent, x.fork, x.length) for x in tree.branches} == {
        "main": (None, 0, 7),
        a: ("main", 4, 2),
        b: ("main", 2, 1),
    }
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == [f"message {i}" for i in (0, 1, 2, 4, 5, 6, 7)]
    await store.switch_branch(chat_id, b)
    assert await _path(store, chat_id) == ["message 0", "message 1", "b2"]


async def test_removing_messages_across_a_fork_keeps_both_continuations(store: Store) -> None:
    chat_id = await _chat(store, 6)
    branch = await store.fork_chat(chat_id, 4)
    await store.append_messages(chat_id, [_msg(4, "new 4"), _msg(5, "new 5")])
    assert await store.remove_messages(chat_id, 2, 3) == 3  # 2, 3 and the branch's new 4
    assert await _path(store, chat_id) == ["message 0", "message 1", "new 5"]
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == ["message 0", "message 1", "message 4", "message 5"]
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.fork, x.length) for x in tree.branches} == {"main": (0, 4), branch: (2, 1)}
    assert await store.remove_messages(chat_id, 9, 1) == 0


async def test_inserting_a_message_moves_every_path_through_it_down(store: Store) -> None:
    chat_id = await _chat(store, 8)
    before = await store.load_chat(chat_id)
    a = await store.fork_chat(chat_id, 5)
    await store.append_messages(chat_id, [_msg(5, "a5"), _msg(6, "a6")])
    b = await store.fork_chat(chat_id, 2)  # a sibling before the insert: untouched
    await store.append_message(chat_id, _msg(2, "b2"))
    await store.switch_branch(chat_id, a)

    stored = await store.insert_message(chat_id, 3, _msg(3, "new 3"))
    assert stored.position == 3
    after = await store.load_chat(chat_id)
    head = ["message 0", "message 1", "message 2"]
    texts = [m.data["mes"] for m in after.messages]
    assert texts == [*head, "new 3", "message 3", "message 4", "a5", "a6"]
    assert [m.position for m in after.messages] == list(range(8))
    assert after.messages[4].id == before.messages[3].id  # moved down, not re-added
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.parent, x.fork, x.length) for x in tree.branches} == {
        "main": (None, 0, 9),
        a: ("main", 6, 2),
        b: ("main", 2, 1),
    }
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == [
        *head,
        "new 3",
        *(f"message {i}" for i in range(3, 8)),
    ]
    await store.switch_branch(chat_id, b)
    assert await _path(store, chat_id) == ["message 0", "message 1", "b2"]


async def test_inserting_at_a_fork_stays_on_the_current_path(store: Store) -> None:
    chat_id = await _chat(store, 6)
    branch = await store.fork_chat(chat_id, 4)
    await store.append_messages(chat_id, [_msg(4, "b4"), _msg(5, "b5")])
    await store.insert_message(chat_id, 4, _msg(4, "inserted"))
    assert (await _path(store, chat_id))[3:] == ["message 3", "inserted", "b4", "b5"]
    await store.insert_message(chat_id, 7, _msg(7, "at the end"))
    assert (await _path(store, chat_id))[-1] == "at the end"
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == [f"message {i}" for i in range(6)]
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.fork, x.length) for x in tree.branches} == {"main": (0, 6), branch: (4, 4)}
    for bad in (-1, 7):
        with pytest.raises(FormatError) as caught:
            await store.insert_message(chat_id, bad, _msg(1))
        assert caught.value.field == "index"


async def test_a_cut_names_the_branches_it_would_drop(store: Store) -> None:
    chat_id = await _chat(store, 6)
    assert await store.cut_would_drop(chat_id, 2) == []  # never branched
    branch = await store.fork_chat(chat_id, 4)
    await store.append_message(chat_id, _msg(4, "new 4"))
    assert await store.cut_would_drop(chat_id, 4) == []  # main's 4 and 5 continue message 3
    assert await store.cut_would_drop(chat_id, 3) == ["main"]
    await store.switch_branch(chat_id, "main")
    assert await store.cut_would_drop(chat_id, 3) == [branch]


async def test_a_delete_that_empties_a_branch_on_the_path_removes_it(store: Store) -> None:
    chat_id = await _chat(store, 6)
    a = await store.fork_chat(chat_id, 3)
    await store.append_messages(chat_id, [_msg(3, "a3"), _msg(4, "a4")])
    b = await store.fork_chat(chat_id, 4)
    await store.append_message(chat_id, _msg(4, "b4"))
    await store.switch_branch(chat_id, a)
    await store.truncate_chat(chat_id, 4)  # a keeps only a3; b is its other continuation
    await store.switch_branch(chat_id, b)
    assert await _path(store, chat_id) == ["message 0", "message 1", "message 2", "a3", "b4"]

    await store.remove_messages(chat_id, 3, 1)  # a3, all that a held
    assert await _path(store, chat_id) == ["message 0", "message 1", "message 2", "b4"]
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.parent, x.fork, x.length) for x in tree.branches} == {
        "main": (None, 0, 6),
        b: ("main", 3, 1),
    }
    await store.switch_branch(chat_id, "main")
    assert await _path(store, chat_id) == [f"message {i}" for i in range(6)]


async def test_a_joined_insert_puts_a_deleted_message_back_under_its_continuation(
    store: Store,
) -> None:
    chat_id = await _chat(store, 6)
    branch = await store.fork_chat(chat_id, 4)  # continues message 3
    await store.append_message(chat_id, _msg(4, "b4"))
    await store.switch_branch(chat_id, "main")
    removed = (await store.load_chat(chat_id)).messages[3].data
    await store.remove_messages(chat_id, 3, 1)
    await store.insert_message(chat_id, 3, removed, join=True)
    assert await _path(store, chat_id) == [f"message {i}" for i in range(6)]
    tree = await store.chat_tree(chat_id)
    assert {x.id: (x.parent, x.fork) for x in tree.branches} == {
        "main": (None, 0),
        branch: ("main", 4),
    }
    await store.switch_branch(chat_id, branch)
    assert await _path(store, chat_id) == [*(f"message {i}" for i in range(4)), "b4"]
