"""What the server adds to a streamed reply, against a scripted upstream on loopback.

Run: ``.venv/bin/python benchmarks/server.py [--runs 40] [--streams 500] [--store-interval 0.2]``
(about four minutes on two cores: 500 chats are made first); ``--skip-streams`` measures
phase 1 alone (under a minute).

Four processes on 127.0.0.1: a scripted OpenAI-compatible upstream, ``tavernkit serve``'s
app (uvicorn, one process, a fresh data dir in a temp folder), a bare relay (the floor, below)
and this client. Every upstream
chunk carries the upstream's ``time.monotonic_ns()`` (one clock for every process of the
machine), so a client knows when each piece left the upstream.

1. **Added time to first token** (``--runs`` sequential requests each): the first content
   byte of a streamed reply, from the moment the request was sent, for
   - direct: the request straight to the upstream;
   - facade: ``POST /v1/chat/completions`` on ``profile/bench`` (the proxy path);
   - turn: ``POST /chats/{id}/turns`` then ``GET .../events`` (the user's message and the
     reply are stored, the prompt is built from the card and the chat);
   - turn in one request: the same POST with ``Accept: text/event-stream``, which answers
     the turn's events itself (a server without it: not measured, printed as nan).
   - floor: the same request through a bare relay on the app's stack (uvicorn with the same
     loop and parser, a raw ASGI app, httpx2 on the providers' transport; a fourth process):
     what the stack itself adds on this machine, under every path of the app.
   Printed: p50 of each and the p50 added over direct (target: < 2 ms added), and each
   path's p50 above the floor; before them, a fresh server's very first facade request and
   first turn (the warm-up round's first: what a user's first message after ``tavernkit
   serve`` waits for, the server's warm-up included or not).
2. **Concurrent streaming turns**: ``--streams`` turns, one per chat, started evenly over
   ``--ramp`` seconds, each reply ``--chunks`` pieces ``--pace`` seconds apart (defaults: 500
   over 20 s, 60 pieces 0.5 s apart: 1,000 pieces a second once all are open); the latency
   of every piece sent while all streams were open (client arrival minus upstream send),
   against the same number of direct streams. Printed: p50/p99 of both and the p99 added
   (target: 500 streams, < 50 ms added), and how many streams completed.
   ``--store-interval`` is the chat service's ``stream_interval`` (how often a streaming
   reply is written to the store; 0.2 s by default). Also printed: the CPU each process spent
   per piece over the whole phase (server, upstream, client; the turns' start and end are in
   the server's), which says who saturates: the direct streams' upstream and client must stay
   far below one core at the rate the turns run, or the baseline is what is slow.

The server runs on uvicorn's ``--loop`` and ``--http`` choices, ``auto`` by default as
``tavernkit serve`` does (uvloop and httptools when installed, else asyncio's loop and h11),
and says which at its start.

Before/after in one run: ``--baseline-src DIR`` (a tavernkit ``src`` folder, e.g. of a
``git worktree add`` of the commit to compare with) measures both phases first with a server
importing that tavernkit, then with this tree's, and prints each figure before -> after with
its target (``--baseline-loop``/``--baseline-http``: the "before" server's loop and parser,
when they differ from this tree's). ``--interleave`` (with ``--baseline-src``; phase 1 only)
runs both servers at once and sends every round to both, alternating which goes first: on a
machine whose speed drifts by a third from one minute to the next, the sequential halves
differ by more than a change of a few tenths of a millisecond.

Diagnostics: ``TAVERNKIT_BENCH_SAMPLES=PATH`` writes the last concurrent phase's pieces
(seconds after the ramp, latency in ms) as JSON, to see when the slow ones came (at 500
streams: all in one ~0.3 s stall once per window, a full garbage collection by the look of
it); ``TAVERNKIT_BENCH_GC_FREEZE=1`` freezes the server's set-up objects out of the garbage
collector's scans (``gc.freeze``) before it serves; ``TAVERNKIT_BENCH_PROFILE=PATH`` profiles
the server (cProfile).

Printed first, beside the load: this machine's cold-cache factor (:func:`cold_cache_factor`),
the time of one memory walk after 3 ms of idle over the same walk back to back. Where it is
well above 1, no path's p50 (the floor's included) is what the same code costs warm.

Bounded: every phase has a deadline (``--deadline`` seconds) and the processes are stopped
at the end whatever happens. Ratios and differences are within one run; on a shared machine
print the load next to them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import gc
import inspect
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

# TAVERNKIT_BENCH_SRC: the tavernkit to serve (``--baseline-src`` sets it for the "before" run)
sys.path.insert(
    0, os.environ.get("TAVERNKIT_BENCH_SRC") or str(Path(__file__).resolve().parent.parent / "src")
)

import httpx2  # noqa: I001 (tavernkit before turn_path, which imports this tree's)
import tavernkit  # from the src above, first: turn_path puts this tree's src ahead of it
from turn_path import CARD  # the same card as the turn-path benchmark

sys.stdout.reconfigure(line_buffering=True)  # progress shows as it happens, also in a file

TTFT_TARGET_MS = 2.0
P99_TARGET_MS = 50.0

_PIECES = re.compile(rb"pieces=(\d+)")


#: the processes this client started (upstream, floor, servers), for a stall's dump
CHILDREN: list[subprocess.Popen[bytes]] = []


def dump_tasks_on_signal() -> None:
    """``kill -USR2 <pid>`` prints every asyncio task of this process with its stack (what a
    stalled request waits on: ``faulthandler``'s thread stacks show only the loop's poll)."""

    def dump() -> None:
        print(f"== tasks of {sys.argv[1:3]} (pid {os.getpid()})", file=sys.stderr)
        for task in asyncio.all_tasks():
            task.print_stack(limit=12, file=sys.stderr)
        sys.stderr.flush()

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, dump)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the upstream ----------------------------------------------------------------------------


async def serve_upstream(port: int, chunks: int, pace: float) -> None:
    """An OpenAI-compatible streaming upstream: ``chunks`` pieces ``pace`` seconds apart,
    each ``"<monotonic_ns>. "``, then a usage chunk and ``[DONE]``."""
    dump_tasks_on_signal()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            headers: dict[str, str] = {}
            await reader.readline()
            while (line := (await reader.readline()).strip()) != b"":
                key, _, value = line.decode().partition(":")
                headers[key.lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if os.environ.get("TAVERNKIT_BENCH_TRACE"):
                print("upstream got", len(body), "bytes", headers, file=sys.stderr, flush=True)
            # the newest message saying how long a reply it wants (the history has older ones)
            asked = _PIECES.findall(body)
            count = int(asked[-1]) if asked else chunks
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )
            for i in range(count):
                if i:
                    await asyncio.sleep(pace)
                text = f"{time.monotonic_ns()}. "
                frame = {"choices": [{"index": 0, "delta": {"content": text}}]}
                writer.write(f"data: {json.dumps(frame)}\n\n".encode())
                await writer.drain()
            end = {
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": 10},
            }
            writer.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            await writer.drain()
            if os.environ.get("TAVERNKIT_BENCH_TRACE"):
                print("upstream answered", count, file=sys.stderr, flush=True)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


# -- the server ------------------------------------------------------------------------------


async def serve_app(
    home: Path,
    port: int,
    upstream: int,
    chats: int,
    ready: Path,
    store_interval: float,
    http: str = "auto",
) -> None:
    import uvicorn

    dump_tasks_on_signal()
    wanted = os.environ.get("TAVERNKIT_BENCH_SRC")
    if wanted and not Path(tavernkit.__file__).resolve().is_relative_to(Path(wanted).resolve()):
        raise SystemExit(f"the server imported tavernkit from {tavernkit.__file__}, not {wanted}")
    from tavernkit.facade import Tavern
    from tavernkit.models.profile import ConnectionProfile
    from tavernkit.models.settings import Settings
    from tavernkit.server.app import create_app
    from tavernkit.server.settings import RateLimit, ServerSettings

    tk = await Tavern(home, load_plugins=False).open()
    await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
    profile = ConnectionProfile(
        name="bench",
        api="chat",
        source="openai",
        base_url=f"http://127.0.0.1:{upstream}/v1",
        model="m1",
    )
    await tk.store.put("connection_profile", profile)
    settings = Settings()
    settings.selections.profile = "bench"
    settings.selections.user_name = "Ada"
    await tk.store.put_settings(settings)
    ids = [(await tk.chats.new_chat("Mira")).id for _ in range(chats)]
    # how often a streaming reply is written to the store (the chat service's option)
    tk.chats.stream_interval = store_interval
    if os.environ.get("TAVERNKIT_BENCH_GC_FREEZE"):  # the set-up's objects out of the GC's scans
        gc.collect()
        gc.freeze()
    if os.environ.get("TAVERNKIT_BENCH_GC_LOG"):  # each full collection's pause, on stderr
        started: list[float] = []

        def pause(phase: str, info: dict[str, int]) -> None:
            if info["generation"] != 2:
                return
            if phase == "start":
                started[:] = [time.perf_counter()]
            elif started:
                ms = (time.perf_counter() - started[0]) * 1000
                print(f"server: full gc {ms:.0f} ms", file=sys.stderr, flush=True)

        gc.callbacks.append(pause)
    # the collector as ``tavernkit serve`` sets it; TAVERNKIT_BENCH_GC=python: Python's defaults
    every = None if os.environ.get("TAVERNKIT_BENCH_GC") == "python" else 300.0
    tuning: dict[str, Any] = {}
    known = inspect.signature(ServerSettings).parameters  # a baseline may lack these
    if "gc_full_every_s" in known:
        tuning["gc_full_every_s"] = every
    if "warm_up" in known:  # as ``tavernkit serve``: loaded before it listens
        tuning["warm_up"] = True
    conf = ServerSettings(home=home, port=port, turn_rate=RateLimit(1_000_000, 1.0), **tuning)
    app = create_app(conf, tavern=tk)
    protocol: Any = http
    if http == "auto":  # as ``tavernkit serve`` ran it in a tree of its own protocol (a baseline)
        with contextlib.suppress(ModuleNotFoundError):
            from tavernkit.server.http_protocol import HttpProtocol  # type: ignore[import-not-found]

            protocol = HttpProtocol
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        backlog=4096,
        timeout_keep_alive=60,
        http=protocol,
    )
    config.load()
    loop = type(asyncio.get_running_loop())
    print(f"server: loop {loop.__module__}.{loop.__name__}, {config.http_protocol_class.__name__}")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    ready.write_text(json.dumps(ids))
    await task
    await tk.close()


# -- the floor: the same server and client libraries, no app ---------------------------------


async def serve_floor(port: int, upstream: int, http: str) -> None:
    """A bare relay on the stack the app runs on: uvicorn (the same ``--loop``/``--http``), a
    raw ASGI app and httpx2 on the providers' transport, passing the request's body to the
    upstream and its bytes back as they come. What it adds to the first token is what the
    stack itself costs on this machine: the floor under the app's figures."""
    dump_tasks_on_signal()
    import ssl

    import uvicorn

    client = httpx2.AsyncClient(timeout=None, verify=ssl.create_default_context())
    url = f"http://127.0.0.1:{upstream}/v1/chat/completions"

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {"content-type": "application/json"}
        async with client.stream("POST", url, content=body, headers=headers) as response:
            start = {"type": "http.response.start", "status": response.status_code}
            await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, http=http
    )
    await uvicorn.Server(config).serve()


# -- the client ------------------------------------------------------------------------------


async def sse_lines(response: httpx2.Response) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield line[6:]


def sent_ns(text: str) -> list[int]:
    return [int(piece) for piece in text.replace(".", " ").split() if piece.isdigit()]


SHORT = "Hi pieces=3"


#: per path, how long after the request its first piece left the upstream (ms): the first
#: token's time split into the part before the upstream call and the relay after it
BEFORE_UPSTREAM: dict[str, list[float]] = {}


def _before_upstream(path: str, start_ns: int, text: str) -> None:
    sent = sent_ns(text)
    if sent:
        BEFORE_UPSTREAM.setdefault(path, []).append((sent[0] - start_ns) / 1e6)


def _content(chunk: str) -> str:
    choices = json.loads(chunk)["choices"]
    return str(choices[0]["delta"].get("content") or "") if choices else ""


async def first_direct(client: httpx2.AsyncClient, upstream: str, path: str = "direct") -> float:
    """The upstream's reply straight (``upstream``), or through the bare relay (the floor)."""
    body = {"model": "m1", "stream": True, "messages": [{"role": "user", "content": SHORT}]}
    start, elapsed, start_ns = time.perf_counter(), 0.0, time.monotonic_ns()
    async with client.stream("POST", f"{upstream}/v1/chat/completions", json=body) as r:
        async for data in sse_lines(r):
            if not elapsed and '"content"' in data:
                elapsed = time.perf_counter() - start
                _before_upstream(path, start_ns, _content(data))
    return elapsed


async def first_facade(client: httpx2.AsyncClient, server: str) -> float:
    body = {
        "model": "profile/bench",
        "stream": True,
        "messages": [{"role": "user", "content": SHORT}],
    }
    start, elapsed, start_ns = time.perf_counter(), 0.0, time.monotonic_ns()
    async with client.stream("POST", f"{server}/v1/chat/completions", json=body) as r:
        async for data in sse_lines(r):
            if not elapsed and data != "[DONE]":
                choices = json.loads(data)["choices"]
                if choices and choices[0]["delta"].get("content"):
                    elapsed = time.perf_counter() - start
                    _before_upstream("facade", start_ns, choices[0]["delta"]["content"])
    return elapsed


Samples = list[tuple[int, float]]  # (upstream send time in ns, latency in ms)


async def turn_stream(
    client: httpx2.AsyncClient,
    server: str,
    chat: str,
    latencies: Samples | None,
    text: str = SHORT,
) -> float:
    """One turn: the time to its first text event; each piece's latency into ``latencies``."""
    start, start_ns = time.perf_counter(), time.monotonic_ns()
    started = await client.post(f"{server}/chats/{chat}/turns", json={"text": text})
    started.raise_for_status()
    first = 0.0
    async with client.stream("GET", f"{server}{started.json()['events']}") as r:
        event = ""
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "text":
                now = time.monotonic_ns()
                if not first:
                    first = time.perf_counter() - start
                    if latencies is None:
                        _before_upstream("turn", start_ns, json.loads(line[6:])["text"])
                if latencies is not None:
                    text = json.loads(line[6:])["text"]
                    latencies += [(ns, (now - ns) / 1e6) for ns in sent_ns(text)]
    return first


async def turn_one_request(client: httpx2.AsyncClient, server: str, chat: str) -> float | None:
    """One turn started and watched in one request (``Accept: text/event-stream`` on the
    POST): the time to its first text event; ``None`` from a server that answers the POST
    with its 202 body instead (a baseline from before it could), after reading the turn out."""
    start, first, start_ns = time.perf_counter(), 0.0, time.monotonic_ns()
    headers = {"accept": "text/event-stream"}
    async with client.stream(
        "POST", f"{server}/chats/{chat}/turns", json={"text": SHORT}, headers=headers
    ) as r:
        r.raise_for_status()
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            events = json.loads(await r.aread())["events"]
            async with client.stream("GET", f"{server}{events}") as rest:
                await rest.aread()
            return None
        event = ""
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "text" and not first:
                first = time.perf_counter() - start
                _before_upstream("turn_one", start_ns, json.loads(line[6:])["text"])
    return first


async def direct_stream(client: httpx2.AsyncClient, upstream: str, latencies: Samples) -> None:
    body = {"model": "m1", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    async with client.stream("POST", f"{upstream}/v1/chat/completions", json=body) as r:
        async for data in sse_lines(r):
            if data == "[DONE]":
                break
            now = time.monotonic_ns()
            content = json.loads(data)["choices"][0]["delta"].get("content") or ""
            latencies += [(ns, (now - ns) / 1e6) for ns in sent_ns(content)]


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of process ``pid`` so far, this process when ``None``
    (Linux's ``/proc``; NaN elsewhere, so the figures say "unknown" rather than lie)."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """The CPU each process of the run spent between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.pids = pids
        self.spent: dict[str, float] = {}

    def start(self) -> None:
        self._start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> None:
        self.spent = {n: cpu_seconds(p) - self._start[n] for n, p in self.pids.items()}

    def per_piece(self, pieces: int) -> str:
        """Microseconds of CPU per piece delivered, per process."""
        return "  ".join(
            f"{name} {self.spent[name] / max(pieces, 1) * 1e6:.0f}" for name in self.pids
        )


def cold_cache_factor(idle_s: float = 0.003, rounds: int = 25) -> tuple[float, float]:
    """The same walk over 4,000 objects scattered in 200,000, back to back and after
    ``idle_s`` of sleep (median ms of each): how much of its caches this machine keeps while
    a process idles. Every phase-1 request follows about a second of idle, so a factor well
    above 1 (about 3 on the shared 2-core VM these figures come from, where even spinning
    instead of sleeping did not help) raises every path's time, the floor's included."""
    objects = [bytearray(64) for _ in range(200_000)]

    def walk() -> float:
        started = time.perf_counter()
        total = 0
        for i in range(0, len(objects), 50):
            total += objects[i][0]
        return (time.perf_counter() - started) * 1000

    walk()
    warm = statistics.median(walk() for _ in range(rounds))
    after: list[float] = []
    for _ in range(rounds):
        time.sleep(idle_s)
        after.append(walk())
    return warm, statistics.median(after)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def concurrent(
    n: int, run: Any, ramp: float, deadline: float, meter: CpuMeter
) -> tuple[list[float], int, int]:
    """``n`` streams started evenly over ``ramp`` seconds; the latencies of the pieces sent
    while all of them were open (after the ramp, before the first one ended), how many
    streams completed and how many pieces arrived in all (``meter`` measures the CPU the
    processes spent on the whole phase)."""
    samples: Samples = []
    ends: list[int] = []

    async def one(i: int) -> None:
        await asyncio.sleep(ramp * i / n)
        await run(i, samples)
        ends.append(time.monotonic_ns())

    ramp_end = time.monotonic_ns() + int(ramp * 1e9)
    meter.start()
    results = await asyncio.wait_for(
        asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True), deadline
    )
    meter.stop()
    ok = sum(1 for r in results if not isinstance(r, BaseException))
    first_end = min(ends) if ends else ramp_end
    steady = [ms for ns, ms in samples if ramp_end <= ns <= first_end]
    dump = os.environ.get("TAVERNKIT_BENCH_SAMPLES")  # a path: where the slow pieces fell
    if dump:
        window = [((ns - ramp_end) / 1e9, ms) for ns, ms in samples if ramp_end <= ns <= first_end]
        Path(dump).write_text(json.dumps(window))
    return steady, ok, len(samples)


#: a phase-1 request with no first token after this long is a stall: left out, and counted
STALL_S = 30.0
STALLED = -1.0


class Stalls:
    """Phase 1's requests bounded by :data:`STALL_S`. Now and then (seen in either tree,
    the bare relay's included) one request's connection to the scripted upstream is accepted
    and never answered, and the run waited out ``--deadline``. A stalled request is left out
    of the figures and counted in the output, and :func:`dump_stall` writes the sockets and
    every process's tasks to stderr, for the next look at the cause."""

    def __init__(self) -> None:
        self.by_path: dict[str, int] = {}

    @property
    def count(self) -> int:
        return sum(self.by_path.values())

    def __str__(self) -> str:
        return ", ".join(f"{path} {n}" for path, n in self.by_path.items())

    async def bound(self, path: str, request: Any) -> Any:
        try:
            async with asyncio.timeout(STALL_S):
                return await request
        except TimeoutError:
            self.by_path[path] = self.by_path.get(path, 0) + 1
            print(f"  a {path} request stalled past {STALL_S:.0f} s", file=sys.stderr, flush=True)
            dump_stall()
            return STALLED

    @staticmethod
    def keep(into: list[float], took: float) -> None:
        if took != STALLED:
            into.append(took)


def dump_stall() -> None:
    """What a stall leaves to read, on stderr: every loopback TCP socket with its queues and
    owner (``ss``), and the asyncio tasks of every process this run started (SIGUSR2)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        sockets = subprocess.run(
            ["ss", "-tanpio"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()
        loopback = [line for line in sockets[1:] if "127.0.0.1:" in line]
        print("\n".join(sockets[:1] + loopback), file=sys.stderr, flush=True)
    for child in CHILDREN:
        if child.poll() is None:
            child.send_signal(signal.SIGUSR2)
    time.sleep(1)  # their dumps land before the run goes on


async def client_main(
    args: argparse.Namespace,
    upstream: str,
    server: str,
    chats: list[str],
    pids: dict[str, int | None],
    floor: str,
) -> dict[str, float]:
    limits = httpx2.Limits(max_connections=args.streams * 2 + 10, max_keepalive_connections=100)
    async with httpx2.AsyncClient(timeout=args.deadline, limits=limits) as client:
        print("warming up...")
        stalls = Stalls()
        cold: dict[str, float] = {}
        for _ in range(3):  # warm both sides up; the first round is the server's first requests
            await stalls.bound("direct", first_direct(client, upstream))
            await stalls.bound("floor", first_direct(client, floor, "floor"))
            cold.setdefault("facade", await stalls.bound("facade", first_facade(client, server)))
            took = await stalls.bound("turn", turn_stream(client, server, chats[0], None))
            cold.setdefault("turn", took)
            took = await stalls.bound("turn_one", turn_one_request(client, server, chats[-1]))
            one_request = took is not None and took != STALLED
        direct: list[float] = []
        facade: list[float] = []
        turn: list[float] = []
        bare: list[float] = []
        one: list[float] = []
        BEFORE_UPSTREAM.clear()  # the warm-up's do not count
        trace = bool(os.environ.get("TAVERNKIT_BENCH_TRACE"))
        for i in range(args.runs):  # interleaved, so drift in the load hits all alike
            stalls.keep(direct, await stalls.bound("direct", first_direct(client, upstream)))
            if trace:
                print("direct", i, file=sys.stderr, flush=True)
            stalls.keep(bare, await stalls.bound("floor", first_direct(client, floor, "floor")))
            stalls.keep(facade, await stalls.bound("facade", first_facade(client, server)))
            if trace:
                print("facade", i, file=sys.stderr, flush=True)
            chat = chats[i % len(chats)]
            stalls.keep(turn, await stalls.bound("turn", turn_stream(client, server, chat, None)))
            if trace:
                print("turn", i, file=sys.stderr, flush=True)
            if one_request:
                took = await stalls.bound("turn_one", turn_one_request(client, server, chat))
                assert took is not None
                stalls.keep(one, took)
        if stalls.count:
            print(f"  {stalls.count} request(s) stalled past {STALL_S:.0f} s, left out: {stalls}")
        d, f, t, b = (statistics.median(x) * 1000 for x in (direct, facade, turn, bare))
        o = statistics.median(one) * 1000 if one else float("nan")
        print(f"time to first token, p50 of {args.runs} (ms):")
        print(
            f"  direct {d:.2f}   facade {f:.2f} (+{f - d:.2f})   turn {t:.2f} (+{t - d:.2f})"
            + (f"   turn in one request {o:.2f} (+{o - d:.2f})" if one else "")
        )
        print(
            f"  added p50: facade {f - d:.2f} ms, turn (POST, then GET its events) {t - d:.2f} ms"
            + (f", turn (POST streaming its events) {o - d:.2f} ms" if one else "")
            + f" (target < {TTFT_TARGET_MS} ms; ratio facade/direct {f / d:.2f}x, "
            f"turn/direct {t / d:.2f}x)"
        )
        print(
            f"  the floor, a bare uvicorn + httpx2 relay (no app): +{b - d:.2f} ms; above it: "
            f"facade +{f - b:.2f}, turn +{t - b:.2f}"
            + (f", turn in one request +{o - b:.2f}" if one else "")
            + " ms"
        )

        split = {k: statistics.median(v) for k, v in BEFORE_UPSTREAM.items() if v}
        whole = {"direct": d, "floor": b, "facade": f, "turn": t, "turn_one": o}
        print(
            "  of which before the upstream sent its first piece / after it (relay), p50 ms: "
            + ", ".join(
                f"{k} {split[k]:.2f} / {whole[k] - split[k]:.2f}" for k in whole if k in split
            )
        )
        # a fresh server's first facade request and first turn (what a user's first message
        # after `tavernkit serve` waits), over the direct call's p50 (the client's own first
        # request is cold too, so not over that)
        first_after_start = {
            k: cold[k] * 1000 - d for k in ("facade", "turn") if cold[k] != STALLED
        }
        print(
            "  a fresh server's first requests, added time to first token (ms): "
            + ", ".join(f"{k} +{v:.1f}" for k, v in first_after_start.items())
        )
        first = {"facade": f - d, "turn": t - d, "turn_one": o - d, "floor": b - d}
        first.update({f"first_{k}": v for k, v in first_after_start.items()})
        if args.skip_streams:
            return first
        n = args.streams
        print(f"{n} concurrent streams, direct then through the server...")

        async def one_direct(i: int, out: Samples) -> None:
            await direct_stream(client, upstream, out)

        async def one_turn(i: int, out: Samples) -> None:
            await turn_stream(client, server, chats[i], out, f"Hi pieces={args.chunks}")

        direct_cpu = CpuMeter({k: v for k, v in pids.items() if k != "server"})
        base, base_ok, base_pieces = await concurrent(
            n, one_direct, args.ramp, args.deadline, direct_cpu
        )
        print("  ... and through the server")
        turns_cpu = CpuMeter(pids)
        via, via_ok, via_pieces = await concurrent(n, one_turn, args.ramp, args.deadline, turns_cpu)
        print(
            f"{n} concurrent streams x {args.chunks} pieces {args.pace * 1000:.0f} ms apart, "
            f"started over {args.ramp:.0f} s; pieces sent while all were open:"
        )
        print(
            f"  direct: {base_ok}/{n} completed, {len(base)} pieces, latency "
            f"p50 {pct(base, 0.5):.2f} ms p99 {pct(base, 0.99):.2f} ms"
        )
        print(
            f"  turns:  {via_ok}/{n} completed, {len(via)} pieces, latency "
            f"p50 {pct(via, 0.5):.2f} ms p99 {pct(via, 0.99):.2f} ms"
        )
        print(
            f"  CPU per piece (us; whole phase, the turns' start and end included): "
            f"direct: {direct_cpu.per_piece(base_pieces)};  turns: "
            f"{turns_cpu.per_piece(via_pieces)}"
        )
        added = pct(via, 0.99) - pct(base, 0.99)
        print(
            f"  p99 added {added:.2f} ms (target < {P99_TARGET_MS} ms at 500 streams); "
            f"ratio p99 turns/direct {pct(via, 0.99) / max(pct(base, 0.99), 1e-9):.2f}x"
        )
        return {
            **first,
            "p50": pct(via, 0.5) - pct(base, 0.5),
            "p99": added,
            "completed": via_ok,
            "server_cpu_us": turns_cpu.spent["server"] / max(via_pieces, 1) * 1e6,
        }


def _child(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(argv, env=env)
    CHILDREN.append(child)
    return child


def spawn_server(
    args: argparse.Namespace,
    port: int,
    upstream: int,
    home: Path,
    ready: Path,
    env: dict[str, str] | None,
    loop: str,
    http: str,
) -> subprocess.Popen[bytes]:
    """``tavernkit serve``'s app in a process of its own (``env``: a ``TAVERNKIT_BENCH_SRC``
    to import tavernkit from), with a fresh chat for each turn phase 1 makes."""
    chats = args.runs + 1 if args.skip_streams else args.streams
    return _child(
        [
            *[sys.executable, __file__],
            *["--role", "server", "--port", str(port), "--upstream-port", str(upstream)],
            *["--home", str(home), "--ready", str(ready), "--streams", str(chats)],
            *["--store-interval", str(args.store_interval), "--loop", loop, "--http", http],
        ],
        env=env,
    )


def spawn_floor(
    args: argparse.Namespace,
    port: int,
    upstream: int,
    env: dict[str, str] | None,
    loop: str,
    http: str,
) -> subprocess.Popen[bytes]:
    return _child(
        [
            *[sys.executable, __file__],
            *["--role", "floor", "--port", str(port), "--upstream-port", str(upstream)],
            *["--loop", loop, "--http", http],
        ],
        env=env,
    )


def spawn_upstream(args: argparse.Namespace, port: int) -> subprocess.Popen[bytes]:
    return _child(
        [
            *[sys.executable, __file__, "--role", "upstream", "--port", str(port)],
            *["--chunks", str(args.chunks), "--pace", str(args.pace)],
        ]
    )


def wait_ready(
    args: argparse.Namespace, procs: list[subprocess.Popen[bytes]], *ready: Path
) -> None:
    limit = time.monotonic() + args.deadline
    while not all(path.exists() for path in ready):
        if time.monotonic() > limit or any(p.poll() is not None for p in procs):
            raise SystemExit("the server did not start")
        time.sleep(0.1)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def measure(args: argparse.Namespace, src: str | None, loop: str, http: str) -> dict[str, float]:
    """One run of both phases against a fresh upstream and server (the server importing
    tavernkit from ``src``, else from this tree, on event loop ``loop`` with HTTP parser
    ``http``); the figures client_main prints."""
    up_port, app_port, floor_port = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready.json"
        env = {**os.environ, "TAVERNKIT_BENCH_SRC": src} if src else None
        procs = [
            spawn_upstream(args, up_port),
            spawn_floor(args, floor_port, up_port, env, loop, http),
            spawn_server(args, app_port, up_port, Path(tmp) / "home", ready, env, loop, http),
        ]
        try:
            wait_ready(args, procs, ready)
            chats = json.loads(ready.read_text())
            return asyncio.run(
                client_main(
                    args,
                    f"http://127.0.0.1:{up_port}",
                    f"http://127.0.0.1:{app_port}",
                    chats,
                    {"server": procs[2].pid, "upstream": procs[0].pid, "client": None},
                    f"http://127.0.0.1:{floor_port}",
                )
            )
        finally:
            stop(procs)


def measure_interleaved(args: argparse.Namespace) -> None:
    """Phase 1 with both servers up at once (``--interleave``): every round sends each path
    to the "before" server and to this tree's (which goes first alternates), so the machine's
    drift (a third from one minute to the next on a shared 2-core machine) hits both alike;
    one upstream, one floor."""
    up_port, floor_port = free_port(), free_port()
    ports = {"before": free_port(), "after": free_port()}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {
            "before": {**os.environ, "TAVERNKIT_BENCH_SRC": str(args.baseline_src)},
            "after": None,
        }
        ready = {side: Path(tmp) / f"{side}.json" for side in ports}
        procs = [
            spawn_upstream(args, up_port),
            spawn_floor(args, floor_port, up_port, None, args.loop, args.http),
        ]
        for side, port in ports.items():
            home = Path(tmp) / side
            procs.append(
                spawn_server(
                    args, port, up_port, home, ready[side], envs[side], args.loop, args.http
                )
            )
        try:
            wait_ready(args, procs, *ready.values())
            servers = {
                side: (f"http://127.0.0.1:{ports[side]}", json.loads(ready[side].read_text()))
                for side in ports
            }
            asyncio.run(
                interleaved_main(
                    args, f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{floor_port}", servers
                )
            )
        finally:
            stop(procs)


async def interleaved_main(
    args: argparse.Namespace, upstream: str, floor: str, servers: dict[str, tuple[str, list[str]]]
) -> None:
    stalls = Stalls()
    paths = ("facade", "turn", "turn_one")
    got: dict[str, dict[str, list[float]]] = {side: {p: [] for p in paths} for side in servers}
    direct: list[float] = []
    bare: list[float] = []

    async def one_round(i: int, chat_of: Any) -> None:
        stalls.keep(direct, await stalls.bound("direct", first_direct(client, upstream)))
        stalls.keep(bare, await stalls.bound("floor", first_direct(client, floor, "floor")))
        sides = list(servers.items())
        if i % 2:  # which goes first alternates: neither always follows the other's work
            sides.reverse()
        for side, (server, chats) in sides:
            chat = chat_of(chats)
            out = got[side]
            stalls.keep(out["facade"], await stalls.bound("facade", first_facade(client, server)))
            stalls.keep(
                out["turn"], await stalls.bound("turn", turn_stream(client, server, chat, None))
            )
            took = await stalls.bound("turn_one", turn_one_request(client, server, chat))
            stalls.keep(out["turn_one"], STALLED if took is None else took)

    async with httpx2.AsyncClient(timeout=args.deadline) as client:
        print("warming up...")
        for _ in range(3):
            await one_round(0, lambda chats: chats[-1])
        for values in (direct, bare, *(v for side in got.values() for v in side.values())):
            values.clear()
        for i in range(args.runs):
            await one_round(i, lambda chats, i=i: chats[i % len(chats)])
    if stalls.count:
        print(f"  {stalls.count} request(s) stalled past {STALL_S:.0f} s, left out: {stalls}")
    d = statistics.median(direct) * 1000
    b = statistics.median(bare) * 1000
    print(f"time to first token, p50 of {args.runs} rounds, both servers in every round (ms):")
    print(f"  direct {d:.2f}   the floor (a bare uvicorn + httpx2 relay) +{b - d:.2f}")
    for path in paths:
        old, new = (
            statistics.median(got[side][path]) * 1000 - d if got[side][path] else float("nan")
            for side in ("before", "after")
        )
        print(
            f"  added p50, {path:8s} {old:6.2f} -> {new:6.2f} ms (target < {TTFT_TARGET_MS} ms; "
            f"after/before {new / max(old, 1e-9):.2f}x; above the floor {old - b + d:.2f} -> "
            f"{new - b + d:.2f})"
        )


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: where a stuck run is
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=60)
    parser.add_argument("--pace", type=float, default=0.5)
    parser.add_argument("--ramp", type=float, default=20.0)
    parser.add_argument("--store-interval", type=float, default=0.2)
    parser.add_argument("--deadline", type=float, default=200.0)
    # the server's event loop and HTTP parser, uvicorn's choices; "auto" is what `tavernkit
    # serve` runs: uvloop and httptools when they are installed, else asyncio and h11
    parser.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto")
    parser.add_argument("--http", choices=["auto", "h11", "httptools"], default="auto")
    # the "before" server's, when they differ (main on asyncio and h11, this tree on uvloop)
    parser.add_argument("--baseline-loop", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument("--baseline-http", choices=["auto", "h11", "httptools"])
    parser.add_argument(
        "--skip-streams",
        action="store_true",
        help="phase 1 only (time to first token): no concurrent streams",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="a tavernkit src folder to measure first, as 'before' (a checkout of main, say)",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="with --baseline-src: phase 1 only, both servers up at once, alternating per round",
    )
    parser.add_argument(
        "--role", choices=["client", "upstream", "server", "floor"], default="client"
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream-port", type=int, default=0)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--ready", type=Path)
    args = parser.parse_args()
    if args.role == "upstream":
        asyncio.run(serve_upstream(args.port, args.chunks, args.pace))
        return
    if args.role == "floor":
        import uvicorn

        loop_factory = uvicorn.Config("unused:app", loop=args.loop).get_loop_factory()
        with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory) as r:
            r.run(serve_floor(args.port, args.upstream_port, args.http))
        return
    if args.role == "server":
        profile = os.environ.get("TAVERNKIT_BENCH_PROFILE")  # a path: cProfile the server
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
            profiler.enable()
        import uvicorn

        loop_factory = uvicorn.Config("unused:app", loop=args.loop).get_loop_factory()
        try:
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                runner.run(
                    serve_app(
                        args.home,
                        args.port,
                        args.upstream_port,
                        args.streams,
                        args.ready,
                        args.store_interval,
                        args.http,
                    )
                )
        except KeyboardInterrupt:
            pass
        finally:
            if profile:
                profiler.disable()
                profiler.dump_stats(profile)
        return
    load = os.getloadavg()
    print(
        f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    warm, idle = cold_cache_factor()
    print(
        f"this machine's caches: a walk over 4,000 scattered objects takes {warm:.2f} ms back to "
        f"back, {idle:.2f} ms after 3 ms idle ({idle / max(warm, 1e-9):.1f}x; each phase-1 "
        "request follows ~1 s of idle)"
    )
    if args.interleave:
        if not args.baseline_src:
            raise SystemExit("--interleave compares two servers: give --baseline-src")
        args.skip_streams = True
        print(f"== before: {args.baseline_src}, after: this tree, in every round")
        measure_interleaved(args)
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        return
    runs: list[tuple[str, dict[str, float]]] = []
    if args.baseline_src:
        print(f"== before: the server from {args.baseline_src}")
        loop, http = args.baseline_loop or args.loop, args.baseline_http or args.http
        runs.append(("before", measure(args, str(args.baseline_src), loop, http)))
        print("== after: this tree's server")
    runs.append(("after" if runs else "this tree", measure(args, None, args.loop, args.http)))
    if len(runs) == 2:
        (_, old), (_, new) = runs
        print(f"before -> after ({0 if args.skip_streams else args.streams} streams):")
        figures = [
            ("facade", "added TTFT p50, facade", TTFT_TARGET_MS),
            ("turn", "added TTFT p50, turn", TTFT_TARGET_MS),
            ("turn_one", "... turn in one request", TTFT_TARGET_MS),
            ("floor", "... a bare relay (floor)", TTFT_TARGET_MS),
        ]
        # a fresh server's first requests: no target of their own, so none is printed
        cold = [
            ("first_facade", "first facade after start"),
            ("first_turn", "first turn after start"),
        ]
        for key, label in cold:
            if key in old and key in new:
                print(
                    f"  {label:26s} {old[key]:9.2f} -> {new[key]:9.2f} ms "
                    f"(after/before {new[key] / max(old[key], 1e-9):.2f}x)"
                )
        if not args.skip_streams:
            figures += [
                ("p50", "added piece latency p50", P99_TARGET_MS),
                ("p99", "added piece latency p99", P99_TARGET_MS),
            ]
        for key, label, target in figures:
            print(
                f"  {label:26s} {old[key]:9.2f} -> {new[key]:9.2f} ms "
                f"(target < {target} ms; after/before {new[key] / max(old[key], 1e-9):.2f}x)"
            )
        if not args.skip_streams:
            print(
                f"  server CPU per piece      {old['server_cpu_us']:9.0f} -> "
                f"{new['server_cpu_us']:9.0f} us (after/before "
                f"{new['server_cpu_us'] / max(old['server_cpu_us'], 1e-9):.2f}x)"
            )
            print(
                f"  streams completed         {old['completed']:.0f} -> {new['completed']:.0f} "
                f"of {args.streams}"
            )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
