"""Searching the text of messages (Store.search_messages), on both backends: what a hit says,
owners kept apart, the index following every write of a message's shown text, input that
would be query syntax, CJK text, narrowing to a chat or a character, and paging."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store._before import migrations_before
from tavernkit.errors import FormatError, NotFound
from tavernkit.store import SqliteStore, Store
from tavernkit.store._search_text import make_snippet, parse_query
from tavernkit.store.chat_types import SwipeText
from tavernkit.store.migrations import apply_migrations
from tavernkit.store.sqlite import open_store as open_sqlite_store
from tavernkit.store.sqlite_thread import connect as connect_sqlite

HEADER: dict[str, Any] = {"user_name": "You", "character_name": "Aria", "chat_metadata": {}}


def bot(text: str, *swipes: str) -> dict[str, Any]:
    return {
        "name": "Aria",
        "is_user": False,
        "mes": text,
        "extra": {},
        "swipe_id": 0,
        "swipes": [text, *swipes],
    }


def user(text: str) -> dict[str, Any]:
    return {"name": "You", "is_user": True, "mes": text, "extra": {}}


async def _found(store: Store, query: str, **scope: Any) -> list[tuple[str, int]]:
    """(chat name, message index) of every hit, in the order they come."""
    page = await store.search_messages(query, limit=100, **scope)
    assert page.total == len(page.hits)
    return [(h.chat_name, h.index) for h in page.hits]


async def test_a_hit_says_where_the_message_is_and_shows_a_snippet(store: Store) -> None:
    char = await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    chat = await store.create_chat(
        HEADER,
        [bot("Welcome to the inn."), user("Is there a DRAGON nearby?"), bot("No dragons here.")],
        name="inn",
        character=char.id,
    )
    page = await store.search_messages("dragon")
    assert page.total == 2
    first, second = page.hits
    # newest first: in a chat, the last message first
    assert (first.index, first.name, first.is_user) == (2, "Aria", False)
    assert (second.index, second.name, second.is_user) == (1, "You", True)
    assert (first.chat_id, first.chat_name) == (chat.id, "inn")
    assert (first.character_id, first.character_name) == (char.id, "Aria")
    assert first.message_id == (await store.load_chat(chat.id)).messages[2].id
    assert second.snippet == "Is there a DRAGON nearby?"
    # case-insensitive, and a word's start finds it
    assert await _found(store, "DRAG") == [("inn", 2), ("inn", 1)]
    # every term must be there
    assert await _found(store, "dragons here") == [("inn", 2)]
    assert await _found(store, "dragon inn") == []


async def test_the_most_recently_updated_chat_comes_first(store: Store) -> None:
    old = await store.create_chat(HEADER, [bot("a lantern")], name="old")
    await store.create_chat(HEADER, [bot("another lantern"), user("lantern?")], name="new")
    assert await _found(store, "lantern") == [("new", 1), ("new", 0), ("old", 0)]
    await store.append_message(old.id, user("the lantern again"))
    assert await _found(store, "lantern") == [("old", 1), ("old", 0), ("new", 1), ("new", 0)]


async def test_a_search_never_finds_another_owners_messages(store: Store) -> None:
    await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    ann = await store.create_chat(HEADER, [bot("ann's secret plan")], name="ann's", owner="ann")
    await store.create_chat(HEADER, [bot("bob's own plan")], name="bob's", owner="bob")
    assert await _found(store, "plan", owner="ann") == [("ann's", 0)]
    assert await _found(store, "plan", owner="bob") == [("bob's", 0)]
    assert await _found(store, "secret", owner="bob") == []
    assert await _found(store, "plan") == []  # the default owner has nothing
    with pytest.raises(NotFound):
        await store.search_messages("plan", owner="bob", chat=ann.id)
    with pytest.raises(NotFound):
        await store.search_messages("plan", owner="bob", chat="ann's")
    with pytest.raises(NotFound):  # the character is the default owner's
        await store.search_messages("plan", owner="bob", character="Aria")


async def test_every_write_of_the_shown_text_moves_the_index(store: Store) -> None:
    chat = await store.create_chat(HEADER, [bot("a quiet morning", "a stormy night")], name="c")
    mid = (await store.load_chat(chat.id)).messages[0].id
    # picking a swipe shows its text
    await store.set_active_swipe(mid, 1)
    assert await _found(store, "stormy") == [("c", 0)]
    assert await _found(store, "quiet") == []
    # an edit
    await store.update_message(mid, bot("a foggy dawn"))
    assert await _found(store, "foggy") == [("c", 0)]
    assert await _found(store, "stormy") == []
    # a new swipe, shown
    await store.append_swipe(mid, "a windy noon")
    assert await _found(store, "windy") == [("c", 0)]
    assert await _found(store, "foggy") == []
    # streaming into the shown swipe, one write and many
    await store.update_swipe_text(mid, 1, "a sunny", complete=False)
    assert await _found(store, "sunny") == [("c", 0)]
    await store.update_swipe_texts([SwipeText(mid, 1, "a sunny afternoon")])
    assert await _found(store, "afternoon") == [("c", 0)]
    # a swipe not shown is not searched
    await store.append_swipe(mid, "a hidden take", activate=False)
    assert await _found(store, "hidden") == []
    # deleting the shown swipe shows the one after it
    await store.delete_swipe(mid, 1)
    assert await _found(store, "afternoon") == []
    assert await _found(store, "hidden") == [("c", 0)]


async def test_deleted_and_truncated_messages_are_not_found(store: Store) -> None:
    chat = await store.create_chat(
        HEADER, [bot("the owl hoots"), user("an owl?"), bot("a grey owl")], name="c"
    )
    other = await store.create_chat(HEADER, [bot("owl feathers")], name="other")
    assert len(await _found(store, "owl")) == 4
    assert await store.truncate_chat(chat.id, 1) == 2
    assert await _found(store, "owl") == [("c", 0), ("other", 0)]
    await store.delete_chat(other.id)
    assert await _found(store, "owl") == [("c", 0)]
    # re-appended after a delete (ChatService.delete re-adds the later messages)
    await store.append_message(chat.id, user("owls again"))
    assert await _found(store, "owl") == [("c", 1), ("c", 0)]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "AND (",
        "OR",
        "NOT x",
        "NEAR(a b)",
        "*",
        "mes:owl",
        "'",
        "\\",
        ":*",
        "a:* | !b & (c)",
        "^start",
        '"unbalanced phrase',
        "-minus +plus",
        "{x y}",
        "%_",
    ],
)
async def test_query_syntax_in_the_input_is_text(store: Store, query: str) -> None:
    text = f"it says {query} literally"
    await store.create_chat(HEADER, [bot("nothing to see"), bot(text)], name="c")
    page = await store.search_messages(query)
    # every term is literal text: the message that holds it is found, the other is not
    assert [h.index for h in page.hits] == [1], query


async def test_a_term_with_a_percent_sign_or_underscore_is_not_a_pattern(store: Store) -> None:
    await store.create_chat(HEADER, [bot("50% off"), bot("5000 off"), bot("a_b")], name="c")
    assert await _found(store, "50%") == [("c", 0)]
    assert await _found(store, "a_b") == [("c", 2)]
    assert await _found(store, "_") == [("c", 2)]


async def test_cjk_text_is_found_by_substring(store: Store) -> None:
    await store.create_chat(
        HEADER,
        [bot("我喜欢吃苹果。"), user("それは美味しいリンゴです"), bot("The apple is sweet.")],
        name="果园",
    )
    assert await _found(store, "苹果") == [("果园", 0)]  # two characters: under a trigram
    assert await _found(store, "喜欢吃") == [("果园", 0)]  # three: the index's
    assert await _found(store, "リンゴ") == [("果园", 1)]
    assert await _found(store, "美味しい リンゴ") == [("果园", 1)]
    assert await _found(store, "苹果 apple") == []


async def test_a_quoted_phrase_is_one_term(store: Store) -> None:
    await store.create_chat(
        HEADER, [bot("the red dragon sleeps"), bot("a dragon, red with rage")], name="c"
    )
    assert await _found(store, "red dragon") == [("c", 1), ("c", 0)]
    assert await _found(store, '"red dragon"') == [("c", 0)]


async def test_a_search_narrows_to_one_chat_or_one_character(store: Store) -> None:
    aria = await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Bran"}})
    one = await store.create_chat(HEADER, [bot("moonlight")], name="one", character=aria.id)
    await store.create_chat(HEADER, [bot("moonlight too")], name="two", character=aria.id)
    await store.create_chat(HEADER, [bot("moonlight three")], name="three", character="Bran")
    await store.create_chat(HEADER, [bot("moonlight alone")], name="none")
    assert await _found(store, "moonlight", chat=one.id) == [("one", 0)]
    assert await _found(store, "moonlight", chat="three") == [("three", 0)]
    assert sorted(await _found(store, "moonlight", character="Aria")) == [("one", 0), ("two", 0)]
    assert await _found(store, "moonlight", character="Bran", chat="one") == []
    assert len(await _found(store, "moonlight")) == 4
    with pytest.raises(NotFound):
        await store.search_messages("moonlight", chat="nope")
    with pytest.raises(NotFound):
        await store.search_messages("moonlight", character="Nobody")


async def test_pages_and_the_total(store: Store) -> None:
    await store.create_chat(HEADER, [bot(f"wave {i}") for i in range(7)], name="sea")
    page = await store.search_messages("wave", limit=3)
    assert (page.total, [h.index for h in page.hits]) == (7, [6, 5, 4])
    page = await store.search_messages("wave", limit=3, offset=6)
    assert (page.total, [h.index for h in page.hits]) == (7, [0])
    page = await store.search_messages("wave", limit=3, offset=9)
    assert (page.total, page.hits) == (7, [])
    page = await store.search_messages("tide")
    assert (page.total, page.hits) == (0, [])


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
async def test_a_query_with_nothing_to_look_for_is_refused(store: Store, query: str) -> None:
    with pytest.raises(FormatError, match="some text"):
        await store.search_messages(query)


async def test_text_no_column_can_hold_matches_nothing(store: Store) -> None:
    await store.create_chat(HEADER, [bot("plain")], name="c")
    assert await _found(store, "pla\x00in") == []
    assert await _found(store, "\ud800") == []


async def test_inside_a_word_sqlite_finds_it_and_postgresql_does_not(
    store: Store, backend: str
) -> None:
    # SQLite's trigram index finds any substring; PostgreSQL's word index finds words and
    # word prefixes (see Store.search_messages)
    await store.create_chat(HEADER, [bot("The dragon sleeps.")], name="c")
    assert await _found(store, "ragon") == ([("c", 0)] if backend == "sqlite" else [])


# -- SQLite's index itself ---------------------------------------------------------------------


async def test_the_migration_indexes_the_messages_stored_before_it(db_path: Path) -> None:
    now = lambda: datetime(2025, 1, 1, tzinfo=UTC)  # noqa: E731
    async with await connect_sqlite(db_path, isolation_level=None) as db:
        await apply_migrations(db, now=now, migrations=migrations_before("008_message_search"))
        await db.execute(
            "INSERT INTO chats (id, owner, name, header, created, updated) "
            "VALUES ('c', 'default', 'old', '{}', '2025-01-01', '2025-01-01')"
        )
        body = json.dumps({"name": "Mira", "is_user": False, "mes": None})
        await db.execute(
            "INSERT INTO messages (id, chat_id, position, body, extracted, mes) "
            "VALUES ('m0', 'c', 0, ?, 'mes', 'An old chat about comets.')",
            (body,),
        )
    async with await open_sqlite_store(db_path) as store:
        page = await store.search_messages("comets")
        assert [(h.message_id, h.name, h.snippet) for h in page.hits] == [
            ("m0", "Mira", "An old chat about comets.")
        ]
        await store.update_message("m0", bot("now about meteors"))
        assert await _found(store, "comets") == []
        assert await _found(store, "meteors") == [("old", 0)]
    with sqlite3.connect(db_path) as raw:  # the index agrees with the table it indexes
        raw.execute(
            "INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)"
        )
    raw.close()


async def test_a_database_without_the_index_still_searches(db_path: Path) -> None:
    """An SQLite without the trigram tokenizer migrates without the index; its searches read
    the text of each message instead (made here by dropping the index)."""
    async with await open_sqlite_store(db_path) as store:
        await store.create_chat(HEADER, [bot("a Comet passes"), bot("我喜欢吃苹果")], name="c")
    with sqlite3.connect(db_path) as raw:
        for trigger in ("messages_search_in", "messages_search_out", "messages_search_edit"):
            raw.execute(f"DROP TRIGGER {trigger}")
        raw.execute("DROP TABLE message_search")
    raw.close()
    async with await open_sqlite_store(db_path) as store:
        assert await _found(store, "comet passes") == [("c", 0)]
        assert await _found(store, "吃苹果") == [("c", 1)]


async def test_a_search_of_a_long_history_reads_the_index_not_every_message(
    sqlite_store: SqliteStore,
) -> None:
    await sqlite_store.create_chat(
        HEADER, [bot(f"line {i} of the ballad") for i in range(300)] + [bot("zephyr")], name="c"
    )
    plans: list[str] = []
    async with sqlite_store._read() as db:
        where = "m.rowid IN (SELECT rowid FROM message_search WHERE message_search MATCH ?)"
        for row in await db.execute_fetchall(
            f"EXPLAIN QUERY PLAN SELECT m.id FROM messages m JOIN chats c ON c.id = m.chat_id "
            f"WHERE c.owner = ? AND {where}",
            ("default", '"zephyr"'),
        ):
            plans.append(str(row[3]))
    assert any("VIRTUAL TABLE INDEX" in p for p in plans), plans
    # the owner's messages are read by their chat's index (the rowids only), never scanned
    assert not any(p.split()[:2] == ["SCAN", "m"] for p in plans), plans
    assert await _found(sqlite_store, "zephyr") == [("c", 300)]


# -- the text helpers ----------------------------------------------------------------------------


def test_terms_are_words_or_quoted_phrases_each_once() -> None:
    assert parse_query('  red "old dragon"  RED dragon ') == ["red", "old dragon", "dragon"]
    assert parse_query('"') == ['"']
    assert parse_query('""') == ['""']
    assert parse_query('"open') == ["open"]
    assert len(parse_query(" ".join(f"w{i}" for i in range(40)))) == 16


def test_a_snippet_is_one_line_around_the_first_match() -> None:
    text = " ".join(f"word{i}" for i in range(100)) + "\n\nthe TARGET here " + "tail " * 50
    snip = make_snippet(text, ["target"])
    assert "TARGET" in snip and "\n" not in snip
    assert snip.startswith("…") and snip.endswith("…")
    assert len(snip) <= 162
    assert make_snippet("short\ntext", ["x"]) == "short text"
    # no match as Python folds case: the start
    assert make_snippet("a" * 300, ["zzz"]).startswith("aaa")
