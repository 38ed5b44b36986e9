"""A big chat import leaves the server answering: another client's requests, made while a
20,000-message chat (about 9 MB) is imported over loopback, are answered as it runs (the
parse and conversion run in a worker thread, the rows go in in batches). The figure itself is
``benchmarks/import_latency.py``'s; this asserts it generously."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from ._live import live_server
from .conftest import settings


def chat_file(messages: int) -> bytes:
    head = {
        "user_name": "Ada",
        "character_name": "Mira",
        "create_date": "2025-01-01@10h00m00s",
        "chat_metadata": {"integrity": "big-import"},
    }
    text = "The lamp is lit at dusk and the keeper climbs the stair. " * 6
    lines: list[dict[str, Any]] = [head]
    for i in range(messages):
        lines.append(
            {
                "name": "Ada" if i % 2 == 0 else "Mira",
                "is_user": i % 2 == 0,
                "is_system": False,
                "send_date": "2025-01-01@10h00m00s",
                "mes": f"{i}: {text}",
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


async def test_another_client_is_answered_while_a_big_chat_imports(tmp_path: Path) -> None:
    data = chat_file(20_000)
    # set up as `tavernkit serve` runs (full collections on a timer, not triggered by the
    # import's allocations): in a test process that has run the suite before this test, a
    # growth-triggered full collection of its heap holds the GIL, and so the loop, for seconds
    limits = settings(tmp_path / "home", upload_max_bytes=len(data) + 1024, gc_full_every_s=3600.0)
    async with (
        live_server(limits) as server,
        httpx.AsyncClient(base_url=server.url, timeout=300) as other,
        httpx.AsyncClient(base_url=server.url, timeout=300) as uploader,
    ):
        waits: list[float] = []
        done = asyncio.Event()

        async def poll() -> None:
            while not done.is_set():
                start = time.perf_counter()
                r = await other.get("/characters", params={"limit": "20"})
                waits.append(time.perf_counter() - start)
                assert r.status_code == 200
                await asyncio.sleep(0.01)

        poller = asyncio.create_task(poll())
        r = await uploader.post("/import/raw", params={"name": "big.jsonl"}, content=data)
        done.set()
        await poller
        assert r.status_code == 201, r.text
        assert r.json()[0]["status"] == "imported"
        stored = await server.state.tavern.store.get_chat_info(r.json()[0]["id"])
        assert stored.message_count == 20_000
        assert len(waits) >= 5, "the other client was answered all along"
        assert max(waits) < 1.0, f"another client waited {max(waits):.2f} s"


async def test_a_chat_uploaded_as_a_file_is_imported_from_disk(tmp_path: Path) -> None:
    """The web UI's upload (multipart): the file is spooled to disk and imported from there,
    a batch at a time; over the server's upload cap it is a 413 and nothing is stored."""
    data = chat_file(1_200)
    limits = settings(tmp_path / "home", upload_max_bytes=len(data) + 4096)
    async with live_server(limits) as server, server.client() as c:
        r = await c.post("/import", files={"file": ("Mira - long.jsonl", data)})
        assert r.status_code == 201, r.text
        (found,) = r.json()
        assert found["kind"] == "chat" and found["status"] == "imported"
        stored = await server.state.tavern.store.load_chat(found["id"])
        assert [line["mes"] for line in stored.lines()[1:]][-1].startswith("1199: ")
        again = await c.post("/import", files={"file": ("copy.jsonl", data)})
        assert again.json()[0]["status"] == "unchanged"
        too_big = await c.post("/import", files={"file": ("big.jsonl", data + data)})
        assert too_big.status_code == 413
        assert len(await server.state.tavern.store.list_chats()) == 1
