"""Chats: lossless import/export through the store, small appends, swipes and streaming."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.formats.chats import chat_to_jsonl, read_chat_jsonl
from tavernkit.models.chat import ChatHeader, Message
from tavernkit.models.settings import Settings
from tavernkit.store import SqliteStore
from tavernkit.store.chat_types import SwipeText
from tavernkit.store.sqlite_thread import SqliteConnection

HEADER: dict[str, Any] = {
    "user_name": "unused",
    "character_name": "unused",
    "create_date": "2024-07-12@01h31m37s123ms",
    "chat_metadata": {
        "integrity": "0b8c1f7e-3a52-4d6b-9c1e-2f9a7d3e5b10",
        "variables": {"mood": "calm", "count": 3},
        "timedWorldInfo": {"sticky": {}, "cooldown": {}},
        "note_prompt": "Keep it short.",
        "note_interval": 1,
        "note_depth": 4,
        "note_position": 1,
        "note_role": 0,
        "zz_extension_state": {"a": [1, 2.5, None]},
    },
}

MESSAGES: list[dict[str, Any]] = [
    {
        "name": "Aria",
        "is_user": False,
        "is_system": False,
        "send_date": "June 19, 2023 2:20pm",
        "mes": "The lamp is lit. ✨ 灯台",
        "extra": {},
        "swipe_id": 0,
        "swipes": ["The lamp is lit. ✨ 灯台", "The fog rolls in."],
        "swipe_info": [
            {"send_date": "June 19, 2023 2:20pm", "extra": {}},
            {"send_date": "June 19, 2023 2:21pm", "extra": {"reasoning": "fog"}},
        ],
    },
    {
        "name": "You",
        "is_user": True,
        "is_system": False,
        "send_date": 1718812345678,
        "mes": "Who keeps it?",
        "extra": {"bias": None, "zz_unknown": True},
        "force_avatar": "User Avatars/me.png",
    },
    {
        "extra": {
            "api": "openai",
            "model": "gpt-x",
            "reasoning": "think",
            "reasoning_duration": None,
            "tool_invocations": [{"id": "c1", "name": "roll", "parameters": "{}", "result": "4"}],
        },
        "name": "Aria",
        "is_user": False,
        "send_date": "2024-6-5 @14h 56m 50s 682ms",
        "mes": "I do.",
        "title": "",
        "gen_started": "2024-06-05T14:56:49.000Z",
        "gen_finished": "2024-06-05T14:56:50.682Z",
        "swipe_id": 2,
        "swipes": ["I did.", "Nobody.", "I do."],
        # Real files carry swipe_info shorter than swipes, and nulls in it.
        "swipe_info": [None, {"send_date": "2024-6-5 @14h 55m 00s 001ms", "extra": {}}],
    },
]


def jsonl(header: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    return "\n".join(
        json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in [header, *messages]
    )


def bot(text: str, i: int = 0) -> dict[str, Any]:
    return {
        "name": "Aria",
        "is_user": False,
        "send_date": f"2025-01-01T00:00:{i % 60:02d}.000Z",
        "mes": text,
        "extra": {"api": "openai", "model": "gpt-x"},
        "swipe_id": 0,
        "swipes": [text],
        "swipe_info": [{"send_date": f"2025-01-01T00:00:{i % 60:02d}.000Z", "extra": {}}],
    }


async def _chat_with(store: SqliteStore, n: int, name: str) -> str:
    info = await store.create_chat(
        ChatHeader.new(), [bot(f"message {i}", i) for i in range(n)], name=name
    )
    assert info.message_count == n
    return info.id


async def test_import_and_export_a_sillytavern_chat_losslessly(store: SqliteStore) -> None:
    text = jsonl(HEADER, MESSAGES)
    chat = read_chat_jsonl(text, source="Aria - 2024.jsonl")
    await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    info = await store.create_chat(chat.header, chat.messages, name="Aria - 2024", character="Aria")
    assert (info.character_name, info.message_count) == ("Aria", 3)

    loaded = await store.load_chat("Aria - 2024")
    # The raw lines are exactly the file's values, in the file's key order.
    assert loaded.lines() == [json.loads(line) for line in text.split("\n")]
    assert [list(m.data) for m in loaded.messages] == [list(m) for m in MESSAGES]
    assert [m.position for m in loaded.messages] == [0, 1, 2]
    # And the Chat model writes back the same file the format module writes for the original.
    assert chat_to_jsonl(loaded.to_chat()) == chat_to_jsonl(chat) == text


async def test_chats_list_by_owner_and_character(store: SqliteStore) -> None:
    char = await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    a = await store.create_chat(HEADER, MESSAGES, name="one", character=char.id)
    await store.create_chat(HEADER, [], name="two")
    await store.create_chat(HEADER, [], name="theirs", owner="bob")
    assert {c.name for c in await store.list_chats()} == {"one", "two"}
    assert [c.id for c in await store.list_chats(character="Aria")] == [a.id]
    assert [c.name for c in await store.list_chats(owner="bob")] == ["theirs"]
    with pytest.raises(NotFound):
        await store.load_chat(a.id, owner="bob")
    with pytest.raises(NotFound):
        await store.append_message(a.id, bot("hi"), owner="bob")
    first = (await store.load_chat(a.id)).messages[0]
    with pytest.raises(NotFound):
        await store.append_swipe(first.id, "x", owner="bob")
    with pytest.raises(NotFound):
        await store.update_swipe_text(first.id, 0, "x", complete=True, owner="bob")
    with pytest.raises(NotFound):
        await store.create_chat(HEADER, [], name="x", character="Nobody")


async def test_deleting_a_character_keeps_its_chats(store: SqliteStore) -> None:
    char = await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    chat = await store.create_chat(HEADER, MESSAGES, name="one", character=char.id)
    await store.delete("character", char.id)
    info = await store.get_chat_info(chat.id)
    assert (info.character_id, info.character_name, info.message_count) == (None, "Aria", 3)


async def test_deleting_a_chat_deletes_its_messages_and_swipes(
    store: SqliteStore, db_path: Any
) -> None:
    chat = await store.create_chat(HEADER, MESSAGES, name="one")
    await store.delete_chat("one")
    with pytest.raises(NotFound):
        await store.get_chat_info(chat.id)
    import sqlite3

    with sqlite3.connect(db_path) as db:
        counts = [
            db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("messages", "swipes")
        ]
    db.close()
    assert counts == [0, 0]


async def test_chat_names_need_not_be_unique_but_lookups_must_be(store: SqliteStore) -> None:
    a = await store.create_chat(HEADER, [], name="same")
    await store.create_chat(HEADER, [], name="same")
    with pytest.raises(Conflict):
        await store.load_chat("same")
    assert (await store.load_chat(a.id)).info.id == a.id
    await store.rename_chat(a.id, "renamed")
    assert (await store.load_chat("renamed")).info.id == a.id


# -- the cost of a write does not grow with the chat -------------------------------------------


@pytest.mark.parametrize("op", ["append_message", "append_swipe", "stream", "metadata"])
async def test_a_write_costs_the_same_on_a_2500_message_chat_as_on_a_10_message_one(
    store: SqliteStore, op: str
) -> None:
    costs = []
    for n in (10, 2500):
        chat_id = await _chat_with(store, n, f"chat {n}")
        last = (await store.load_chat(chat_id)).messages[-1]
        async with store.trace() as stats:
            if op == "append_message":
                await store.append_message(chat_id, bot("a new reply", 7))
            elif op == "append_swipe":
                await store.append_swipe(last.id, "another take", info={"extra": {}})
            elif op == "stream":
                await store.update_swipe_text(last.id, 0, "partial tex", complete=False)
            else:
                await store.update_chat_metadata(chat_id, {"variables": {"x": 1}})
        costs.append((stats.statements, stats.changes, stats.sql_chars))
    small, big = costs
    assert big[:2] == small[:2], f"{op}: {small} for 10 messages, {big} for 2500"
    # The bytes sent differ only by the digits of a position (10 vs 2500), traced again for
    # each step of the triggers that count the message and its bytes and index its text; a
    # rewrite of the chat would send hundreds of kilobytes.
    assert abs(big[2] - small[2]) <= 16, f"{op}: {small} for 10 messages, {big} for 2500"
    statements, changes, _ = small
    # One message (or swipe) row, its swipe row, the chat's updated stamp and message counts
    # (kept by triggers): a handful at most. SQLite's trace also sees the search index's
    # trigger and FTS5's own writes of the small segment it adds for the new text (its
    # structure record, a leaf, an index entry): about eight statements and five changes more;
    # and the owner's stored bytes (storage_use: one row, written by the triggers of each row
    # the write touches, the message's and its swipe's).
    assert statements <= 20 and changes <= 12


async def test_append_message_adds_one_row_at_the_end(store: SqliteStore, backend: str) -> None:
    chat_id = await _chat_with(store, 2, "c")
    async with store.trace() as stats:
        stored = await store.append_message(chat_id, Message.new("You", "Hello", is_user=True))
    if backend == "sqlite":
        # the message row, the chat's counts and the owner's stored bytes (triggers') and its
        # updated stamp; the search index's row for its text and FTS5's four writes of the
        # segment that holds it
        assert stats.changes == 9
    else:
        # one statement, a transaction by itself (its row counts are not seen by the trace)
        assert (stats.statements, stats.transactions) == (1, 0)
    assert stored.position == 2
    loaded = await store.load_chat(chat_id)
    assert loaded.messages[-1].data == {
        "name": "You",
        "is_user": True,
        "is_system": False,
        "mes": "Hello",
        "extra": {},
    }
    assert (await store.get_message(stored.id)).data == loaded.messages[-1].data


async def test_update_and_truncate(store: SqliteStore) -> None:
    chat_id = await _chat_with(store, 5, "c")
    msgs = (await store.load_chat(chat_id)).messages
    edited = {**msgs[1].data, "mes": "edited", "swipes": ["edited", "second"], "swipe_id": 0}
    await store.update_message(msgs[1].id, edited)
    assert (await store.get_message(msgs[1].id)).data == edited
    assert await store.truncate_chat(chat_id, 3) == 2
    loaded = await store.load_chat(chat_id)
    assert [m.position for m in loaded.messages] == [0, 1, 2]
    appended = await store.append_message(chat_id, bot("after"))
    assert appended.position == 3


async def test_header_and_metadata_updates_are_one_row(store: SqliteStore, backend: str) -> None:
    chat = await store.create_chat(HEADER, MESSAGES, name="c")
    meta = {**HEADER["chat_metadata"], "variables": {"mood": "stormy"}}
    async with store.trace() as stats:
        await store.update_chat_metadata(chat.id, meta)
    # and, on SQLite's trace, the owner's stored bytes (a trigger's)
    assert stats.changes == (2 if backend == "sqlite" else 1)
    loaded = await store.load_chat(chat.id)
    assert loaded.header == {**HEADER, "chat_metadata": meta}
    assert list(loaded.header) == list(HEADER)  # the header's key order is kept
    await store.update_chat_header(chat.id, ChatHeader.new())
    assert (await store.load_chat(chat.id)).header == ChatHeader.new().to_wire()
    with pytest.raises(NotFound):
        await store.update_chat_metadata("missing", {})


# -- swipes --------------------------------------------------------------------------------------


async def test_append_swipe_shows_it_and_copies_its_info(store: SqliteStore) -> None:
    chat_id = await _chat_with(store, 1, "c")
    [msg] = (await store.load_chat(chat_id)).messages
    info = {"send_date": "2025-02-02T00:00:00.000Z", "extra": {"model": "other", "reasoning": "r"}}
    idx = await store.append_swipe(msg.id, "second take", info=info)
    assert idx == 1
    data = (await store.get_message(msg.id)).data
    assert data["swipes"] == ["message 0", "second take"]
    assert data["swipe_id"] == 1 and data["mes"] == "second take"
    assert data["swipe_info"][1] == info
    assert data["send_date"] == info["send_date"] and data["extra"] == info["extra"]
    assert list(data) == list(msg.data)  # no key moved
    # The model agrees on what is shown.
    model = Message.model_validate(data)
    assert model.current_reasoning == "r"

    await store.set_active_swipe(msg.id, 0)
    data = (await store.get_message(msg.id)).data
    assert (data["swipe_id"], data["mes"], data["extra"]) == (0, "message 0", {})
    with pytest.raises(NotFound):
        await store.set_active_swipe(msg.id, 5)

    idx = await store.append_swipe(msg.id, "third, not shown", activate=False)
    data = (await store.get_message(msg.id)).data
    assert idx == 2 and data["swipe_id"] == 0
    assert len(data["swipes"]) == 3 and len(data["swipe_info"]) == 2


async def test_a_message_without_swipes_gets_its_text_as_swipe_zero(store: SqliteStore) -> None:
    chat = await store.create_chat(HEADER, [MESSAGES[1]], name="c")
    [msg] = (await store.load_chat(chat.id)).messages
    await store.append_swipe(msg.id, "Who keeps the lamp?")
    data = (await store.get_message(msg.id)).data
    assert data["swipes"] == ["Who keeps it?", "Who keeps the lamp?"]
    assert data["swipe_id"] == 1 and data["mes"] == "Who keeps the lamp?"
    assert "swipe_info" not in data


async def test_append_messages_marks_the_last_ones_swipes_partial(store: SqliteStore) -> None:
    """A turn's user message and reply place in one append, the place already partial."""
    chat_id = await _chat_with(store, 1, "c")
    user = Message.new("Ada", "Hi", is_user=True)
    place = Message.new("Mira", "", is_user=False)
    place.ensure_swipes()
    first, second = await store.append_messages(chat_id, [user, place], last_partial=(0,))
    assert (first.position, second.position) == (1, 2)
    stored = (await store.load_chat(chat_id)).messages
    assert [m.partial_swipes for m in stored[1:]] == [(), (0,)]
    assert stored[2].data["swipes"] == [""]
    # without it, nothing is partial
    await store.append_messages(chat_id, [Message.new("Ada", "Bye", is_user=True)])
    assert (await store.load_chat(chat_id)).messages[3].partial_swipes == ()


async def test_streaming_persists_partial_text_then_completes(store: SqliteStore) -> None:
    chat_id = await _chat_with(store, 1, "c")
    [msg] = (await store.load_chat(chat_id)).messages
    idx = await store.append_swipe(msg.id, "", info={"extra": {}}, complete=False)
    for partial in ("Th", "The tide", "The tide turns"):
        await store.update_swipe_text(msg.id, idx, partial, complete=False)
    # A crash here leaves the partial text, marked as such.
    mid_stream = (await store.load_chat(chat_id)).messages[0]
    assert mid_stream.data["mes"] == "The tide turns"
    assert mid_stream.data["swipes"][idx] == "The tide turns"
    assert mid_stream.partial_swipes == (idx,)
    await store.update_swipe_text(msg.id, idx, "The tide turns.", complete=True)
    done = await store.get_message(msg.id)
    assert done.partial_swipes == () and done.data["mes"] == "The tide turns."
    # Streaming into a swipe that is not shown leaves mes alone.
    await store.update_swipe_text(msg.id, 0, "rewritten", complete=True)
    data = (await store.get_message(msg.id)).data
    assert data["swipes"][0] == "rewritten" and data["mes"] == "The tide turns."
    with pytest.raises(NotFound):
        await store.update_swipe_text(msg.id, 9, "x", complete=True)


async def test_delete_swipe_renumbers_and_keeps_the_shown_one(store: SqliteStore) -> None:
    chat = await store.create_chat(HEADER, [MESSAGES[2]], name="c")
    [msg] = (await store.load_chat(chat.id)).messages
    await store.delete_swipe(msg.id, 0)  # before the shown swipe (2)
    data = (await store.get_message(msg.id)).data
    assert data["swipes"] == ["Nobody.", "I do."]
    assert data["swipe_info"] == [{"send_date": "2024-6-5 @14h 55m 00s 001ms", "extra": {}}]
    assert (data["swipe_id"], data["mes"]) == (1, "I do.")
    await store.delete_swipe(msg.id, 1)  # the shown one: the previous takes its place
    data = (await store.get_message(msg.id)).data
    assert (data["swipes"], data["swipe_id"], data["mes"]) == (["Nobody."], 0, "Nobody.")
    with pytest.raises(Conflict):
        await store.delete_swipe(msg.id, 0)


async def test_lone_surrogates_round_trip_or_fail_cleanly(store: SqliteStore) -> None:
    odd = {**MESSAGES[1], "mes": "half \ud83d pair", "swipes": ["x\udc00"]}
    chat = await store.create_chat(HEADER, [odd], name="c")
    [msg] = (await store.load_chat(chat.id)).messages
    assert msg.data == odd
    with pytest.raises(FormatError):
        await store.create_chat(HEADER, [], name="bad \ud800 name")


async def test_concurrent_appends_are_serialised(store: SqliteStore) -> None:
    import asyncio

    chat_id = await _chat_with(store, 3, "c")
    stored = await asyncio.gather(*(store.append_message(chat_id, bot(f"r{i}")) for i in range(20)))
    assert sorted(m.position for m in stored) == list(range(3, 23))
    loaded = await store.load_chat(chat_id)
    assert [m.position for m in loaded.messages] == list(range(23))
    assert {m.data["mes"] for m in loaded.messages[3:]} == {f"r{i}" for i in range(20)}


async def test_many_streaming_swipes_are_written_in_one_transaction(
    store: SqliteStore, backend: str
) -> None:
    ids = [await _chat_with(store, 1, f"c{n}") for n in range(3)]
    msgs = [(await store.load_chat(chat_id)).messages[0] for chat_id in ids]
    shown = await store.append_swipe(msgs[1].id, "", complete=False)  # the shown swipe
    theirs = await store.create_chat(ChatHeader.new(), [bot("hers")], name="t", owner="bob")
    [hers] = (await store.load_chat(theirs.id, owner="bob")).messages
    items = [
        SwipeText(msgs[0].id, 0, "first"),
        SwipeText(msgs[1].id, shown, "second"),
        SwipeText(msgs[2].id, 7, "no such swipe"),
        SwipeText(hers.id, 0, "not mine", owner="alice"),  # another owner's message
        SwipeText(hers.id, 0, "hers, by her", owner="bob"),
    ]
    if backend == "sqlite":  # its statement trace counts the transactions
        begun: list[str] = []
        async with store.trace(lambda sql: begun.append(sql) if sql == "BEGIN IMMEDIATE" else 0):
            assert await store.update_swipe_texts(items) == [2, 3]  # the rest were written
        assert len(begun) == 1
    else:
        assert await store.update_swipe_texts(items) == [2, 3]
    one = await store.get_message(msgs[0].id)
    assert (one.data["mes"], one.partial_swipes) == ("first", (0,))
    two = await store.get_message(msgs[1].id)
    assert two.data["swipes"][shown] == two.data["mes"] == "second"
    assert two.partial_swipes == (shown,)
    assert (await store.get_message(msgs[2].id)).data["mes"] == "message 0"
    her = await store.get_message(hers.id, owner="bob")
    assert (her.data["mes"], her.partial_swipes) == ("hers, by her", (0,))
    assert await store.update_swipe_texts([]) == []


async def test_a_swipe_named_twice_in_one_batch_keeps_its_last_text(store: SqliteStore) -> None:
    chat_id = await _chat_with(store, 1, "c")
    [msg] = (await store.load_chat(chat_id)).messages
    items = [SwipeText(msg.id, 0, "early"), SwipeText(msg.id, 0, "later")]
    assert await store.update_swipe_texts(items) == []
    stored = await store.get_message(msg.id)
    assert (stored.data["mes"], stored.data["swipes"][0]) == ("later", "later")
    # and one named for the wrong owner beside the right one: only that one is missing
    wrong = [SwipeText(msg.id, 0, "not theirs", owner="bob"), SwipeText(msg.id, 0, "mine")]
    assert await store.update_swipe_texts(wrong) == [0]
    assert (await store.get_message(msg.id)).data["mes"] == "mine"


def _hidden(text: str) -> dict[str, Any]:
    return {**bot(text), "is_system": True}


@pytest.mark.parametrize(
    ("shape", "last"),
    [
        ("ssss", 8),  # shorter than the window: no head
        ("ssss", 4),  # exactly the window
        ("hhsssssss", 3),  # hidden first messages, then the first shown one: the head
        ("hhhhhh", 2),  # nothing shown: the head runs up to the tail
        ("shhsss", 2),  # the first message shown: the head is that one
    ],
)
async def test_a_turns_start_reads_the_window_the_window_read_gives(
    store: SqliteStore, shape: str, last: int
) -> None:
    """``load_turn_start``'s window (PostgreSQL: one statement of its own) equals
    ``load_chat_window``'s: head, tail, counts, partial swipes, by id and by name."""
    messages = [(_hidden if c == "h" else bot)(f"m{i}") for i, c in enumerate(shape)]
    messages[-1] = {**messages[-1], "swipes": ["m", "two", "three"], "swipe_id": 2}
    info = await store.create_chat(ChatHeader.new(), messages, name="shaped")
    last_id = (await store.load_chat_window(info.id, last=1)).tail[-1].id
    await store.update_message(last_id, messages[-1], partial=[2])
    for ref in (info.id, "shaped"):
        start = await store.load_turn_start(ref, last=last)
        window = await store.load_chat_window(ref, last=last)
        assert start.window == window
        assert start.window.tail[-1].partial_swipes == (2,)
        assert start.settings is None and start.global_variables == {}
    await store.create_chat(ChatHeader.new(), [], name="shaped")
    with pytest.raises(Conflict):
        await store.load_turn_start("shaped", last=last)
    assert (await store.load_turn_start(info.id, last=last)).window.info.id == info.id


async def test_a_turns_start_reads_what_the_three_reads_would(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_turn_start``: the settings, the window and the global variables, as the three
    calls give them; on SQLite over the read connection, with no trip to the database
    thread."""
    chat_id = await _chat_with(store, 5, "c")
    settings = Settings()
    settings.selections.user_name = "Ada"
    await store.put_settings(settings)
    await store.set_global_variable("mood", {"calm": True})
    trips: list[object] = []
    if type(store) is SqliteStore:
        real = SqliteConnection.run

        async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            trips.append(fn)
            return await real(self, fn, *args, **kwargs)

        monkeypatch.setattr(SqliteConnection, "run", counted)
    start = await store.load_turn_start(chat_id, last=2)
    if type(store) is SqliteStore:
        assert trips == []
    monkeypatch.undo()
    window = await store.load_chat_window(chat_id, last=2)
    assert start.window == window and len(window.tail) == 2
    assert start.settings == await store.get_settings()
    assert start.global_variables == {"mood": {"calm": True}}
    with pytest.raises(NotFound):
        await store.load_turn_start("no such chat", last=2)
    assert (await store.load_turn_start(chat_id, last=2)).window == window  # still usable
