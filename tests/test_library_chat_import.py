"""Importing a chat file at scale: the stored chats with the file's ``integrity`` id are found
by the store's index (no other chat is loaded to compare), a long chat is written in batches
and reads back line for line, and a chat file is read a batch at a time (the memory an import
takes follows a batch, not the file)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import FormatError
from tavernkit.facade import Tavern
from tavernkit.library_chats import CHAT_BATCH
from tavernkit.store import SqliteStore


def chat_file(integrity: str, messages: int, *, text: str = "line") -> bytes:
    head = {
        "user_name": "Ada",
        "character_name": "Mira",
        "create_date": "2025-01-01@10h00m00s",
        "chat_metadata": {"integrity": integrity},
    }
    lines: list[dict[str, Any]] = [head]
    for i in range(messages):
        lines.append(
            {
                "name": "Ada" if i % 2 == 0 else "Mira",
                "is_user": i % 2 == 0,
                "is_system": False,
                "send_date": "2025-01-01@10h00m00s",
                "mes": f"{text} {i}",
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


def loads_of_chats(statements: list[str]) -> int:
    """How many reads of a chat's messages ``statements`` hold (``load_chat`` reads them)."""
    return sum(
        1 for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM messages" in s
    )


async def test_the_integrity_id_is_looked_up_not_every_chat_loaded(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        store = tk.store
        assert isinstance(store, SqliteStore)
        for i in range(30):
            await tk.library.import_bytes(chat_file(f"id-{i}", 4), source=f"chat {i}.jsonl")
        seen: list[str] = []
        async with store.trace(seen.append):
            new = await tk.library.import_bytes(chat_file("id-new", 4), source="new.jsonl")
        assert [r.status for r in new] == ["imported"]
        assert loads_of_chats(seen) == 0, "no stored chat shares the id: none is loaded"
        seen.clear()
        async with store.trace(seen.append):
            again = await tk.library.import_bytes(chat_file("id-7", 4), source="renamed.jsonl")
        assert [r.status for r in again] == ["unchanged"]
        assert loads_of_chats(seen) == 1, "only the chat with the id is compared"
        seen.clear()
        async with store.trace(seen.append):  # a branch: the id, other content
            branch = await tk.library.import_bytes(chat_file("id-7", 5), source="Branch #1.jsonl")
        assert [r.status for r in branch] == ["imported"]
        assert loads_of_chats(seen) == 0, "a chat of another length is not loaded"


async def test_a_long_chat_is_written_in_batches_and_reads_back_whole(tmp_path: Path) -> None:
    n = CHAT_BATCH * 2 + 37
    data = chat_file("long", n, text="a longer line of the chat")
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        store = tk.store
        assert isinstance(store, SqliteStore)
        seen: list[str] = []
        async with store.trace(seen.append):
            (result,) = await tk.library.import_bytes(data, source="long.jsonl")
        assert result.status == "imported"
        assert seen.count("BEGIN IMMEDIATE") >= 3, "one transaction per batch"
        stored = await store.load_chat(result.id)
        assert [json.loads(line) for line in data.decode().splitlines()][1:] == [
            {k: m[k] for k in ("name", "is_user", "is_system", "send_date", "mes")}
            for m in stored.lines()[1:]
        ]
        assert (await store.get_chat_info(result.id)).message_count == n


async def _import_peak(home: Path, path: Path) -> tuple[int, str]:
    """The Python memory peak of importing ``path`` (after the store is open), and the id."""
    async with Tavern(home, load_plugins=False) as tk:
        tracemalloc.start()
        try:
            (result,) = await tk.library.import_file(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result.status == "imported"
        return peak, result.id


async def test_a_chat_file_is_imported_in_memory_for_a_batch_not_the_file(tmp_path: Path) -> None:
    text = "the keeper climbs the stair " * 10
    peaks: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for batches in (8, 32):
        path = tmp_path / f"chat {batches}.jsonl"
        path.write_bytes(chat_file(f"big {batches}", CHAT_BATCH * batches, text=text))
        sizes[batches] = path.stat().st_size
        peaks[batches], chat_id = await _import_peak(tmp_path / f"home {batches}", path)
    for batches in (8, 32):
        print(
            f"a {sizes[batches] / 1e6:.1f} MB chat ({batches} batches) imported with a Python"
            f" memory peak of {peaks[batches] / 1e6:.1f} MB"
        )
    # four times the file, about the same peak: it follows a batch
    assert peaks[32] < peaks[8] * 1.5, peaks
    assert peaks[32] < sizes[32], (peaks, sizes)  # the whole-file reader holds it twice over
    async with Tavern(tmp_path / "home 32", load_plugins=False) as tk:
        stored = await tk.store.load_chat(chat_id)
        assert len(stored.lines()) == CHAT_BATCH * 32 + 1
        assert stored.lines()[-1]["mes"].endswith(f" {CHAT_BATCH * 32 - 1}")
        # the same file again: compared a batch at a time with the stored chat
        (again,) = await tk.library.import_file(path, source="other name.jsonl")
        assert again.status == "unchanged" and again.id == chat_id


async def test_a_chat_file_with_bad_bytes_is_read_whole_with_them_replaced(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(chat_file("bad", 3).replace(b"line 2", b"line \xff2"))
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        (result,) = await tk.library.import_file(path)
        assert result.status == "imported" and "U+FFFD" in result.note
        stored = await tk.store.load_chat(result.id)
        assert stored.lines()[3]["mes"] == "line \ufffd2"


async def test_a_bad_line_late_in_a_file_leaves_the_stored_chats_as_they_were(
    tmp_path: Path,
) -> None:
    good = chat_file("same", CHAT_BATCH + 10)
    lines = chat_file("other", CHAT_BATCH + 10).split(b"\n")
    lines[CHAT_BATCH + 5] = b'{"name": "Mira", "mes": '  # cut off
    path = tmp_path / "chat.jsonl"
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        path.write_bytes(good)
        (first,) = await tk.library.import_file(path)
        path.write_bytes(b"\n".join(lines))
        with pytest.raises(FormatError) as caught:
            await tk.library.import_file(path, replace=True)
        assert caught.value.field == f"line {CHAT_BATCH + 6}"
        chats = await tk.store.list_chats()
        assert [c.id for c in chats] == [first.id]
        assert len((await tk.store.load_chat(first.id)).lines()) == CHAT_BATCH + 11
