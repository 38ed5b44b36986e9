"""The server's per-request cost: the app's whole ASGI stack (middleware, routing, FastAPI's
dependency solving, body parse and response) for requests whose handlers do nothing, in one
run against a baseline.

Run: ``.venv/bin/python benchmarks/server_request.py [--requests 3000] [--baseline-src DIR]``.

The app is :func:`~tavernkit.server.app.create_app` of a fresh home (accounts off, the local
user) with two probe routes put first in the routing: ``POST /probe/chats/{id}/turns`` takes
the turn route's parameters (the JSON ``TurnBody``, ``CurrentPrincipal``, ``UserTavern``, the
server state; answers a ``TurnStartedBody``), ``GET /probe/chats/{id}`` takes ``UserTavern``.
Requests are ASGI calls in process (no socket, no store read), so what is timed is the
server's own cost per request. Printed: microseconds per request (best and median of 5
batches) and, with ``--baseline-src`` (a tavernkit ``src`` folder, e.g. of a worktree of an
older commit, run in a subprocess), before -> after with the ratio. The load average is
printed: on a shared machine the absolute figures move, the ratio much less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# TAVERNKIT_BENCH_SRC: the tavernkit to time (``--baseline-src`` sets it for the "before" run)
sys.path.insert(
    0, os.environ.get("TAVERNKIT_BENCH_SRC") or str(Path(__file__).resolve().parent.parent / "src")
)

from fastapi import APIRouter, FastAPI

from tavernkit.facade import Tavern
from tavernkit.server.app import create_app
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.routes.turns import State, TurnBody, TurnStartedBody
from tavernkit.server.settings import ServerSettings

probe = APIRouter()


@probe.post("/probe/chats/{chat_id}/turns", status_code=202, response_model=TurnStartedBody)
async def post_probe(
    chat_id: str, body: TurnBody, principal: CurrentPrincipal, tk: UserTavern, state: State
) -> Any:
    return TurnStartedBody(turn_id="t1", chat_id=chat_id, kind=body.kind, events="/e")


@probe.get("/probe/chats/{chat_id}")
async def get_probe(chat_id: str, tk: UserTavern) -> dict[str, str]:
    return {"id": chat_id, "owner": tk.owner}


async def call(app: FastAPI, method: str, path: str, body: bytes = b"") -> int:
    """One request as uvicorn hands it over (ASGI 2.3, a loopback Host); its status."""
    headers = [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"bench"), (b"accept", b"*/*")]
    if body:
        headers += [(b"content-type", b"application/json")]
        headers += [(b"content-length", str(len(body)).encode())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent: list[dict[str, Any]] = []
    read = [False]

    async def receive() -> dict[str, Any]:
        if not read[0]:
            read[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the response is sent
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


async def measure(requests: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        tk = Tavern(home, load_plugins=False)
        app = create_app(ServerSettings(home=home), tavern=tk)
        app.include_router(probe)
        app.router.routes.insert(0, app.router.routes.pop())  # matched first: no route scan
        body = json.dumps({"text": "Hi there"}).encode()
        cases = [
            ("POST, the turn route's parameters", "POST", "/probe/chats/c1/turns", body, 202),
            ("GET, UserTavern", "GET", "/probe/chats/c1", b"", 200),
        ]
        async with app.router.lifespan_context(app):
            for label, method, path, payload, status in cases:
                for _ in range(300):  # warm up (and check the probe answers as it should)
                    assert await call(app, method, path, payload) == status, label
                batch = max(requests // 5, 1)
                per: list[float] = []
                for _ in range(5):
                    start = time.perf_counter()
                    for _ in range(batch):
                        await call(app, method, path, payload)
                    per.append((time.perf_counter() - start) / batch * 1e6)
                out[label] = (min(per), statistics.median(per))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--baseline-src", type=Path, help="a tavernkit src folder to compare")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # for the parent
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(measure(args.requests))))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    after = asyncio.run(measure(args.requests))
    before: dict[str, list[float]] = {}
    if args.baseline_src:
        env = {**os.environ, "TAVERNKIT_BENCH_SRC": str(args.baseline_src.resolve())}
        cmd = [sys.executable, __file__, "--json", "--requests", str(args.requests)]
        before = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True).stdout)
    print(f"us per request, best / median of 5 batches of {max(args.requests // 5, 1)}")
    for label, (best, median) in after.items():
        line = f"  {label:36} {best:7.1f} / {median:7.1f}"
        if label in before:
            old_best, old_median = before[label]
            line += f"   before {old_best:7.1f} / {old_median:7.1f}   after/before "
            line += f"{median / old_median:.2f}x"
        print(line)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
