"""The server half of ``benchmarks/scale.py``: chat turns through real ``tavernkit serve``
processes against a scripted upstream on loopback.

Four set-ups, all running at once, each serving the same load in turn: one process on SQLite
(the default), one on PostgreSQL + Redis, two on PostgreSQL + Redis, and two on SQLite, each
with a home (a database) of its own (the clients alternate between the two processes of a
pair). Each runs the load for ``WARM_UP_S`` first, not measured (a running deployment's pools
are open and its statements prepared); then ``rounds`` rounds measure each set-up for
``seconds`` on new chats of its own, the set-ups in a rotating order (this machine's noise is
±15% from one round to the next: many short rounds, and the median of their paired ratios,
keep one busy moment from deciding a ratio). ``clients``
concurrent clients each run turns on their own chat (``POST /chats/{id}/turns``, then read its
events to ``done``). Each reply is ``chunks`` pieces ``pace`` seconds apart from the scripted
upstream.

Two processes spend more CPU a turn than one on either backend: each is half as busy, so
fewer turns share each wake-up, and the two interpreters share the machine's caches. The SQLite
pair measures that cost of the shape alone, so the PostgreSQL + Redis pair is compared with
it (what the backend costs at the deployment's shape) as well as with the single SQLite process
(what moving a one-process server to the deployment costs, the shape included).

Printed per set-up: turns per second, p50/p99 of a turn (POST sent to ``done`` read) and
p99 added latency (a turn's p99 minus the p50 of the same reply read straight from the
upstream, measured in this run), and the CPU per turn (user + system, from ``/proc``): of the
``tavernkit serve`` processes, and with the PostgreSQL cluster's processes and
``redis-server`` added (what the deployment spends; SQLite's is all in the process); then the
ratios 2 processes ÷ 1 (PostgreSQL) and the CPU ratios, each the median of the rounds'
ratios to the base's same round: PostgreSQL + Redis ÷ SQLite with one process and with two
(target ≤ 1.5), two PostgreSQL + Redis processes ÷ one SQLite process, and two SQLite
processes ÷ one. Bounded: a set-up stops at ``seconds`` plus a deadline, and every process is
stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx
import redis.asyncio

from chat.conftest import stock_world  # type: ignore[import-not-found]
from generation._scripted_server import Reply, ScriptedServer  # type: ignore[import-not-found]
from server._processes import ServeProcess, start_serve  # type: ignore[import-not-found]
from tavernkit.facade import Tavern

__all__ = ["run_turns"]

#: each set-up runs the same load this long before it is measured (its pools' connections
#: opened, its statements prepared, its caches filled: what a running deployment has)
WARM_UP_S = 3.0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far (Linux's ``/proc``; 0 once gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """``pid``'s child processes (a PostgreSQL cluster's backends are its postmaster's)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


@dataclass
class Servers:
    """The processes besides tavernkit's whose CPU a deployment on PostgreSQL + Redis spends:
    the cluster's postmaster (with every backend, each read by pid so one that started
    during the load counts from 0) and ``redis-server`` (its own ``INFO cpu``)."""

    postmaster: int | None
    redis_url: str

    async def cpu(self) -> dict[int | str, float]:
        out: dict[int | str, float] = {}
        if self.postmaster is not None:
            for pid in [self.postmaster, *children(self.postmaster)]:
                out[pid] = cpu_seconds(pid)
        client = redis.asyncio.Redis.from_url(self.redis_url)
        try:
            info = await client.info("cpu")
            out["redis"] = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        finally:
            await client.aclose()
        return out


def spent(before: dict[int | str, float], after: dict[int | str, float]) -> float:
    return sum(value - before.get(key, 0.0) for key, value in after.items())


@dataclass
class Figures:
    label: str
    turns: int
    failed: int
    elapsed_s: float
    latencies_ms: list[float]
    #: CPU seconds of the tavernkit processes, and of the PostgreSQL and Redis servers
    cpu_s: float = 0.0
    servers_cpu_s: float = 0.0
    #: of which ``redis-server``'s
    redis_cpu_s: float = 0.0

    def cpu_ms_per_turn(self, *, with_servers: bool) -> float:
        total = self.cpu_s + (self.servers_cpu_s if with_servers else 0.0)
        return total * 1000 / self.turns if self.turns else float("nan")

    @property
    def per_second(self) -> float:
        return self.turns / self.elapsed_s if self.elapsed_s else 0.0

    def p(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, int(len(ordered) * q) - 1)] if ordered else float("nan")


async def _direct_ms(upstream: ScriptedServer, runs: int) -> list[float]:
    """The reply read straight from the upstream (the baseline a turn adds to)."""
    out = []
    body = {"model": "m1", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=upstream.base_url, timeout=30) as client:
        for _ in range(runs):
            start = time.perf_counter()
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                async for _ in response.aiter_bytes():
                    pass
            out.append((time.perf_counter() - start) * 1000)
    return out


async def _one_turn(client: httpx.AsyncClient, chat: str) -> float | None:
    start = time.perf_counter()
    started = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
    if started.status_code != 202:
        return None
    done, status = False, None
    # to the stream's end, not just ``done``: the chat is free once the log is closed
    async with client.stream("GET", started.json()["events"]) as response:
        async for line in response.aiter_lines():
            if line == "event: done":
                done = True
            elif done and status is None and line.startswith("data: "):
                status = json.loads(line[6:]).get("status")
    return (time.perf_counter() - start) * 1000 if status == "completed" else None


async def _load(
    label: str,
    servers: list[ServeProcess],
    chats: list[str],
    seconds: float,
    deadline_s: float,
    backends: Servers | None = None,
) -> Figures:
    latencies: list[float] = []
    failed = 0
    pids = [s.proc.pid for s in servers]
    cpu_before = [cpu_seconds(pid) for pid in pids]
    servers_before = await backends.cpu() if backends is not None else {}
    stop_at = time.perf_counter() + seconds

    async def client_loop(n: int, chat: str) -> None:
        nonlocal failed
        server = servers[n % len(servers)]
        async with server.client() as client:
            while time.perf_counter() < stop_at:
                took = await _one_turn(client, chat)
                if took is None:
                    failed += 1
                else:
                    latencies.append(took)

    start = time.perf_counter()
    tasks = [asyncio.create_task(client_loop(n, chat)) for n, chat in enumerate(chats)]
    _, pending = await asyncio.wait(tasks, timeout=seconds + deadline_s)
    for task in pending:
        task.cancel()
    elapsed = time.perf_counter() - start
    cpu = sum(cpu_seconds(pid) - b for pid, b in zip(pids, cpu_before, strict=True))
    servers_after = await backends.cpu() if backends is not None else {}
    servers_cpu = spent(servers_before, servers_after)
    redis_cpu = servers_after.get("redis", 0.0) - servers_before.get("redis", 0.0)
    return Figures(
        label,
        len(latencies),
        failed + len(pending),
        elapsed,
        latencies,
        cpu,
        servers_cpu,
        redis_cpu,
    )


async def _new_chats(tk: Tavern, count: int, sets: int) -> list[list[str]]:
    """``sets`` lists of ``count`` new chats with Mira (the world already stocked)."""
    return [[(await tk.chats.new_chat("Mira")).id for _ in range(count)] for _ in range(sets)]


async def _pair_chats(
    homes: list[Path], upstream: ScriptedServer, count: int, sets: int
) -> list[list[str]]:
    """``sets`` lists of ``count`` new chats, alternating between ``homes`` (each stocked
    here), as the clients alternate between the homes' processes."""
    per_home = []  # per home, ``sets`` lists of its share of the chats
    for home in homes:
        async with Tavern(home) as tk:
            await stock_world(tk, upstream.base_url)
            per_home.append(await _new_chats(tk, -(-count // len(homes)), sets))
    return [
        [per_home[n % len(homes)][s][n // len(homes)] for n in range(count)] for s in range(sets)
    ]


async def run_turns(
    database: str,
    redis_url: str,
    folder: Path,
    *,
    clients: int,
    seconds: float,
    chunks: int,
    pace: float,
    rounds: int = 3,
    postmaster: int | None = None,
    deadline_s: float = 30.0,
) -> None:
    # sentences: the turn shows a sentence's words together, so each is one piece
    pieces = [f"Piece {i}. " for i in range(chunks)]
    text = "".join(pieces)
    backends = Servers(postmaster, redis_url)
    rate = ("--turn-rate", "1000000")
    shared = ("--database", database, "--redis", redis_url, *rate)
    async with ScriptedServer([Reply(text=text, chunks=pieces, pace=pace)]) as upstream:
        direct = statistics.median(await _direct_ms(upstream, 20))
        # every set-up's chats made first: a warm-up's, then one set per round
        async with Tavern(folder / "sqlite-home") as tk:
            await stock_world(tk, upstream.base_url)
            sqlite_chats = await _new_chats(tk, clients, rounds + 1)
        sqlite_pair_chats = await _pair_chats(
            [folder / "sqlite-a", folder / "sqlite-b"], upstream, clients, rounds + 1
        )
        async with Tavern(folder / "pg-setup", database=database) as tk:
            await stock_world(tk, upstream.base_url)
            one_chats = await _new_chats(tk, clients, rounds + 1)
            two_chats = await _new_chats(tk, clients, rounds + 1)
        env = {"TAVERNKIT_KEY_DIR": str(folder / "keys")}
        alone, *processes = await asyncio.gather(
            start_serve(folder / "sqlite-home", *rate, env={}),
            *(start_serve(folder / f"sqlite-{n}", *rate, env={}) for n in "ab"),
            *(start_serve(folder / f"pg-{n}", *shared, env=env) for n in "ab"),
        )
        sqlite_pair, pair = processes[:2], processes[2:]
        set_ups = [
            _SetUp("1 process, SQLite", [alone], sqlite_chats, None),
            _SetUp("1 process, PostgreSQL", pair[:1], one_chats, backends),
            _SetUp("2 processes, PostgreSQL", pair, two_chats, backends),
            _SetUp("2 processes, SQLite", sqlite_pair, sqlite_pair_chats, None),
        ]
        try:
            for set_up in set_ups:  # pools open, statements prepared: a running deployment's
                await _load("warm-up", set_up.servers, set_up.chats[0], WARM_UP_S, deadline_s)
            for round_ in range(rounds):
                # the set-ups take turns, in a rotating order: a busier moment of the machine
                # falls on each of them alike
                order = set_ups[round_ % len(set_ups) :] + set_ups[: round_ % len(set_ups)]
                for set_up in order:
                    set_up.rounds.append(
                        await _load(
                            set_up.label,
                            set_up.servers,
                            set_up.chats[round_ + 1],
                            seconds,
                            deadline_s,
                            set_up.backends,
                        )
                    )
        finally:
            await asyncio.gather(alone.stop(), *(s.stop() for s in processes))
    shape = (
        f"{clients} clients, {rounds} rounds of {seconds:.0f} s per set-up, "
        f"replies of {chunks} pieces {pace} s apart"
    )
    print(f"\nturns: {shape}")
    print(f"  direct from the upstream: p50 {direct:7.1f} ms")
    for set_up in set_ups:
        _print_set_up(set_up, direct)
    sqlite, pg, two, sqlite_two = set_ups
    print("ratios (this run; CPU: the median of the rounds' ratios to the base's same round):")
    print(f"  2 processes ÷ 1 (PostgreSQL) turns/s: {two.per_second / pg.per_second:5.2f}x")
    print(f"  PostgreSQL ÷ SQLite (1 process) turns/s: {pg.per_second / sqlite.per_second:5.2f}x")
    # the backend against SQLite at the same shape (the target), then across shapes
    for f, base, what, target in (
        (pg, sqlite, "1 process, PostgreSQL + Redis ÷ SQLite", " (target ≤ 1.5)"),
        (two, sqlite_two, "2 processes, PostgreSQL + Redis ÷ SQLite", " (target ≤ 1.5)"),
        (two, sqlite, "2 processes on PostgreSQL + Redis ÷ 1 on SQLite", ""),
    ):
        own = f.cpu_ratio(base, with_servers=False)
        total = f.cpu_ratio(base, with_servers=True)
        print(
            f"  CPU per turn, {what}: tavernkit {own:5.2f}x, "
            f"with PostgreSQL + Redis {total:5.2f}x{target}"
        )
    two_cost = sqlite_two.cpu_ratio(sqlite, with_servers=False)
    print(f"  CPU per turn, 2 processes ÷ 1 on SQLite (the shape's own cost): {two_cost:5.2f}x")


@dataclass
class _SetUp:
    label: str
    servers: list[ServeProcess]
    #: a warm-up's chats, then one set per round
    chats: list[list[str]]
    backends: Servers | None
    rounds: list[Figures] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        elapsed = sum(f.elapsed_s for f in self.rounds)
        return sum(f.turns for f in self.rounds) / elapsed if elapsed else 0.0

    def cpu_ms(self, *, with_servers: bool) -> list[float]:
        return [f.cpu_ms_per_turn(with_servers=with_servers) for f in self.rounds]

    def cpu_ratio(self, base: _SetUp, *, with_servers: bool) -> float:
        """The median over the rounds of this set-up's CPU per turn ÷ ``base``'s
        (tavernkit's alone) in the same round."""
        own = self.cpu_ms(with_servers=with_servers)
        theirs = base.cpu_ms(with_servers=False)
        return statistics.median(a / b for a, b in zip(own, theirs, strict=True))


def _print_set_up(set_up: _SetUp, direct: float) -> None:
    latencies = [ms for f in set_up.rounds for ms in f.latencies_ms]
    every = Figures(set_up.label, len(latencies), 0, 0.0, latencies)
    failed = sum(f.failed for f in set_up.rounds)
    print(
        f"  {set_up.label:24} {set_up.per_second:6.1f} turns/s  p50 {every.p(0.5):7.1f} ms  "
        f"p99 {every.p(0.99):7.1f} ms  p99 added {every.p(0.99) - direct:7.1f} ms  "
        f"({len(latencies)} turns, {failed} failed)"
    )
    own, total = set_up.cpu_ms(with_servers=False), set_up.cpu_ms(with_servers=True)
    redis = [f.redis_cpu_s * 1000 / f.turns for f in set_up.rounds if f.turns]
    print(
        f"  {'':24} CPU per turn (median of the rounds): tavernkit "
        f"{statistics.median(own):6.1f} ms, with PostgreSQL + Redis "
        f"{statistics.median(total):6.1f} ms"
        + (f" (Redis {statistics.median(redis):.1f} ms)" if any(redis) else "")
        + f"; rounds {', '.join(f'{t:.1f}' for t in total)}"
    )
