"""``GET /health`` while a storm of failed logins hits the server (issue 34, finding 1).

Run: ``.venv/bin/python benchmarks/login_storm.py [--clients 16] [--seconds 6] [--spread]``
(about 20 s; loopback only; everything stops by itself).

A real ``tavernkit serve --accounts`` (its default argon2 profile, RFC 9106 low-memory: ~0.2 s
and 64 MiB a check) on 127.0.0.1 with a fresh home. This process sends ``GET /health`` every
``--interval`` seconds (answered or not: a user's request comes when it comes), first idle,
then while a second process runs ``--clients`` clients, each posting failed logins back to
back, every attempt under a name never used before, for ``--seconds``. Printed: the probe's
p50/p99 idle and under the storm, their ratio (target: p50 under 3x idle), and what the storm
got (how many 401s: argon2 checks the server made; how many 429s: refused before any hashing).

On Linux the server runs on one half of the CPUs and the clients on the other (``--no-pin``:
all share all): on one machine the attacker's CPU would otherwise be taken from the server,
which a remote attacker's is not.

``--health`` makes the storm's clients ask ``GET /health`` as fast as they can instead: the
reference for what any such flood of cheap requests costs the others.

``--spread`` gives every storm client its own source address (127.0.0.10, .11, ...), so the
per-address limit does not stop them and the cap on logins checked at once is what holds.

Before/after: ``--src DIR`` runs the server from another tavernkit ``src`` folder (e.g. a
``git archive`` of the commit before); the probe and the storm are this file's either way.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx

SRC = Path(__file__).resolve().parents[1] / "src"
PASSWORD = "benchmark password 1"


def split_cpus() -> tuple[set[int], set[int]] | None:
    """The CPUs for the server and for the clients (the probe and the storm): halves of this
    process's, so the attacker's CPU is not the server's, as when it is another machine.
    ``None`` with fewer than two CPUs or no affinity calls (not Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


async def start_server(
    home: Path, src: Path, cpus: set[int] | None
) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "TAVERNKIT_ADMIN_PASSWORD": PASSWORD}

    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tavernkit.cli import main; main()",
        "serve",
        "--accounts",
        "--create-admin",
        "admin",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--home",
        str(home),
        stdout=asyncio.subprocess.PIPE,
        env=env,
        preexec_fn=pin,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
    if not line.startswith("tavernkit serving http://"):
        proc.kill()
        raise SystemExit(f"tavernkit serve did not start: {line!r}")
    url = line.split()[2]
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(600):
            try:
                if (await client.get("/health")).status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    proc.kill()
    raise SystemExit("the server never answered /health")


async def probe(url: str, seconds: float, interval: float) -> list[tuple[float, float]]:
    """``GET /health`` latencies (ms) of requests sent every ``interval`` for ``seconds``,
    whether the ones before have been answered or not (a closed loop would send fewer while
    the server stalls, and so miss the stalls it measures)."""
    latencies: list[tuple[float, float]] = []  # (seconds into the probe, ms)
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:

        async def one() -> None:
            sent = time.perf_counter()
            response = await client.get("/health")
            latencies.append((sent - start, (time.perf_counter() - sent) * 1000))
            assert response.status_code == 200, response.text

        await client.get("/health")  # a connection is open before the first timing
        tasks: list[asyncio.Task[None]] = []
        start = time.perf_counter()
        while time.perf_counter() < start + seconds:
            tasks.append(asyncio.create_task(one()))
            await asyncio.sleep(max(0.0, start + len(tasks) * interval - time.perf_counter()))
        await asyncio.gather(*tasks)
    return latencies


async def storm(url: str, clients: int, seconds: float, spread: bool, health: bool) -> None:
    """The storm's process: ``clients`` clients posting failed logins for ``seconds`` (or
    asking ``GET /health``, with ``health``); prints its answers' statuses as
    ``status=count`` on one line."""
    counts: collections.Counter[str] = collections.Counter()
    end = time.monotonic() + seconds

    async def one(n: int) -> None:
        source = f"127.0.0.{10 + n}" if spread else None
        transport = httpx.AsyncHTTPTransport(local_address=source)
        async with httpx.AsyncClient(base_url=url, timeout=60.0, transport=transport) as c:
            attempt = 0
            while time.monotonic() < end:
                attempt += 1
                body = {"name": f"storm-{n}-{attempt}", "password": "wrong password"}
                try:
                    if health:
                        response = await c.get("/health")
                    else:
                        response = await c.post("/auth/login", json=body)
                    counts[str(response.status_code)] += 1
                except httpx.TransportError as exc:
                    counts[type(exc).__name__] += 1

    await asyncio.gather(*(one(n) for n in range(clients)))
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if values else 0.0


async def main(args: argparse.Namespace) -> None:
    split = None if args.no_pin else split_cpus()
    if split is not None:
        os.sched_setaffinity(0, split[1])  # the probe, and the storm it starts
    with tempfile.TemporaryDirectory() as tmp:
        server_cpus = split[0] if split else None
        proc, url = await start_server(Path(tmp) / "home", Path(args.src), server_cpus)
        try:
            await probe(url, 1.0, args.interval)  # warm the route
            idle = await probe(url, args.seconds, args.interval)
            storming = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--storm",
                url,
                "--clients",
                str(args.clients),
                "--seconds",
                str(args.seconds + 0.6),
                *(["--spread"] if args.spread else []),
                *(["--health"] if args.health else []),
                stdout=asyncio.subprocess.PIPE,
            )
            await asyncio.sleep(0.3)  # the storm is under way before the first timing
            loaded = await probe(url, args.seconds, args.interval)
            out, _ = await asyncio.wait_for(storming.communicate(), args.seconds + 120)
        finally:
            proc.terminate()
            await proc.wait()
    idle50, idle99 = pct([ms for _, ms in idle], 50), pct([ms for _, ms in idle], 99)
    load50, load99 = pct([ms for _, ms in loaded], 50), pct([ms for _, ms in loaded], 99)
    seconds = [[ms for t, ms in loaded if n <= t < n + 1] for n in range(int(args.seconds))]
    where = "own addresses" if args.spread else "one address"
    what = "asking GET /health" if args.health else "distinct names"
    pinned = f"server on CPUs {sorted(split[0])}, clients on {sorted(split[1])}" if split else ""
    print(f"server: {args.src} {pinned or '(not pinned)'}")
    print(f"/health idle:  p50 {idle50:7.2f} ms  p99 {idle99:7.2f} ms  ({len(idle)} requests)")
    print(
        f"/health storm: p50 {load50:7.2f} ms  p99 {load99:7.2f} ms  ({len(loaded)} requests; "
        f"{args.clients} clients, {what}, {where})"
    )
    ratio = load50 / idle50 if idle50 else float("nan")
    verdict = "ok" if ratio < 3 else "OVER TARGET"
    print(f"ratio p50 storm/idle: {ratio:.2f} (target < 3: {verdict}); p99 {load99 / idle99:.2f}")
    print("storm p50 second by second: " + " ".join(f"{pct(v, 50):.1f}" for v in seconds if v))
    print(f"storm answers: {out.decode().strip()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between probes")
    parser.add_argument("--spread", action="store_true", help="a source address per client")
    parser.add_argument(
        "--health", action="store_true", help="the storm asks GET /health instead (a reference)"
    )
    parser.add_argument("--no-pin", action="store_true", help="share every CPU (no affinity)")
    parser.add_argument("--src", default=str(SRC), help="the tavernkit src the server runs")
    parser.add_argument("--storm", metavar="URL", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.storm:
        storming = storm(
            options.storm, options.clients, options.seconds, options.spread, options.health
        )
        asyncio.run(storming)
    else:
        asyncio.run(main(options))
