"""Where the facade's first token goes, step by step, inside a real server; and what one more
process between the client and the upstream costs by itself.

Run: ``.venv/bin/python benchmarks/facade_timeline.py [--runs 40] [--gap 0.3]`` (about a
minute on two cores).

1. **The hop**: the first token's p50 straight to the scripted upstream, through a byte pipe
   on uvloop (no HTTP parsing: what one more process costs by itself) and through
   ``server.py``'s bare uvicorn + httpx2 relay (its floor), ``--runs`` rounds interleaved.
   On this project's 2-core VM the pipe added 0.007 ms and the relay 1.15 ms (2026-12-02): the
   floor under the server's figures is the HTTP stack's code run cold, not the extra process.
2. **The timeline**: ``tavernkit serve``'s app (``server.py``'s server role) with a stamp at
   each step of ``POST /v1/chat/completions`` (streamed, on a connection profile: the proxy
   path), the median of each stamp's time since the ASGI call over ``--runs`` requests, each
   after ``--gap`` seconds of idle (cold, as a user's request is). The stamps wrap functions
   by name, so each costs a few microseconds and the total runs above ``server.py``'s; a
   step that a change renamed is left out, and the list says which were found.

Bounded: every request has a deadline, and the processes are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

import httpx2  # noqa: E402

import server as bench  # noqa: E402 (the benchmark's upstream, floor and client requests)

# -- the byte pipe ---------------------------------------------------------------------------


async def serve_pipe(port: int, upstream: int) -> None:
    """Each accepted connection piped, both ways, to a new connection to the upstream."""
    loop = asyncio.get_running_loop()

    class Up(asyncio.Protocol):
        def __init__(self, down: asyncio.Transport) -> None:
            self.down = down
            self.transport: asyncio.Transport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport  # type: ignore[assignment]

        def data_received(self, data: bytes) -> None:
            self.down.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.down.close()

    class Down(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: asyncio.Transport = transport  # type: ignore[assignment]
            self.early: list[bytes] = []
            self.up: Up | None = None
            self.opening = loop.create_task(self.open())

        async def open(self) -> None:
            _, up = await loop.create_connection(lambda: Up(self.transport), "127.0.0.1", upstream)
            self.up = up
            assert up.transport is not None
            for data in self.early:
                up.transport.write(data)

        def data_received(self, data: bytes) -> None:
            if self.up is None or self.up.transport is None:
                self.early.append(data)
            else:
                self.up.transport.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.up is not None and self.up.transport is not None:
                self.up.transport.close()

    server = await loop.create_server(Down, "127.0.0.1", port)
    await server.serve_forever()


# -- the stamped server ----------------------------------------------------------------------

_NOW = time.perf_counter_ns
_current: list[tuple[str, int]] | None = None
_requests: list[dict[str, float]] = []
_found: list[str] = []


def _stamp(label: str) -> None:
    if _current is not None:
        _current.append((label, _NOW()))


def _wrap(owner: Any, name: str, label: str) -> None:
    """Stamp ``label>`` when ``owner.name`` is called and ``label<`` when it returns (for an
    async generator: ``label1`` at its first item)."""
    fn = getattr(owner, name, None)
    if fn is None:
        return
    _found.append(label)
    if _kind(fn) == "agen":

        @functools.wraps(fn)
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            _stamp(label + ">")
            first = True
            async for item in fn(*args, **kwargs):
                if first:
                    _stamp(label + "1")
                    first = False
                yield item

    elif _kind(fn) == "async":

        @functools.wraps(fn)
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            _stamp(label + ">")
            try:
                return await fn(*args, **kwargs)
            finally:
                _stamp(label + "<")

    else:

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            _stamp(label + ">")
            try:
                return fn(*args, **kwargs)
            finally:
                _stamp(label + "<")

    setattr(owner, name, wrapped)


def _kind(fn: Any) -> str:
    if inspect.isasyncgenfunction(fn):
        return "agen"
    return "async" if inspect.iscoroutinefunction(fn) else "sync"


def install_stamps() -> None:
    import httpcore2
    import starlette.middleware.errors as errors_mw
    import uvicorn.protocols.http.httptools_impl as httptools_impl

    import tavernkit.context.request_data as request_data
    import tavernkit.context.request_primitives as primitives
    import tavernkit.context.tavern_context as tavern_context
    import tavernkit.providers.provider as provider
    import tavernkit.server.app as app_module
    import tavernkit.server.body_limit as body_limit
    import tavernkit.server.openai_facade as facade
    import tavernkit.server.routes.openai as routes
    import tavernkit.server.sse as sse

    steps: list[tuple[Any, str, str]] = [
        (errors_mw.ServerErrorMiddleware, "__call__", "middlewares"),
        (body_limit.BodyLimit, "__call__", "body_limit"),
        (routes, "state_of", "route"),
        (routes, "current_principal", "principal"),
        (routes, "_request_body", "body"),
        (routes, "resolve_model", "resolve_model"),
        (routes, "complete", "complete"),
        (facade, "send_streaming_request", "send_streaming_request"),
        (primitives, "_chat_request", "chat_request"),
        (tavern_context, "resolve_connection", "resolve_connection"),
        (request_data.tp, "validate_task_messages", "validate_messages"),
        (request_data._Sender, "chat_sampling", "sampling"),
        (primitives, "_stream_chunks", "stream_chunks"),
        (tavern_context.TavernContext, "plan_for", "plan_for"),
        (request_data, "send_one", "send_one"),
        (provider.Provider, "stream", "provider_stream"),
        (provider.Provider, "_request", "provider_request"),
        (httpx2.AsyncClient, "send", "http_send"),
        (httpcore2.AsyncConnectionPool, "handle_async_request", "pool"),
        (httpcore2.AnyIOBackend, "connect_tcp", "connect"),
        (sse._Stream, "_send", "sse_send"),
        (httptools_impl.RequestResponseCycle, "send", "uvicorn_send"),
    ]
    for owner, name, label in steps:
        _wrap(owner, name, label)

    create_app = app_module.create_app

    def stamped_app(*args: Any, **kwargs: Any) -> Any:
        app = create_app(*args, **kwargs)

        async def asgi(scope: Any, receive: Any, send: Any) -> None:
            global _current
            if scope["type"] != "http" or scope["path"] != "/v1/chat/completions":
                await app(scope, receive, send)
                return
            _current = [("asgi", _NOW())]
            start = _current[0][1]

            async def stamped_send(message: Any) -> None:
                global _current
                body = message.get("body") or b""
                if message["type"] == "http.response.start":
                    _stamp("response_start")
                elif _current is not None and body.count(b'"content"') > 1:
                    _stamp("first_token_sent")
                    _requests.append({k: (t - start) / 1000 for k, t in reversed(_current)})
                    _current = None
                await send(message)

            await app(scope, receive, stamped_send)

        return asgi

    app_module.create_app = stamped_app  # type: ignore[assignment]


def report(*_: object) -> None:
    if not _requests:
        print("timeline: no requests", flush=True)
        return
    labels: list[str] = []
    for request in _requests:
        labels += [label for label in request if label not in labels]
    rows = sorted(
        (statistics.median(r[label] for r in _requests if label in r), label) for label in labels
    )
    print(f"timeline of {len(_requests)} requests, median µs since the ASGI call:", flush=True)
    for at, label in rows:
        print(f"  {at:8.1f}  {label}", flush=True)
    missing = sorted({s.rstrip("><1") for s in _found} - {s.rstrip("><1") for s in labels})
    if missing:
        print(f"  (wrapped, never called: {', '.join(missing)})", flush=True)
    _requests.clear()


# -- the client ------------------------------------------------------------------------------


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *argv])


async def hop(args: argparse.Namespace, urls: dict[str, str]) -> None:
    got: dict[str, list[float]] = {name: [] for name in urls}
    async with httpx2.AsyncClient(timeout=30) as client:
        order = list(urls)
        for i in range(args.runs + 5):
            order = order[1:] + order[:1]  # which goes first rotates
            for name in order:
                took = await asyncio.wait_for(bench.first_direct(client, urls[name], name), 30)
                if i >= 5:
                    got[name].append(took * 1000)
                await asyncio.sleep(args.gap / 10)
    direct = statistics.median(got["direct"])
    print(f"first token p50 of {args.runs} rounds (ms): direct {direct:.3f}")
    for name in ("pipe", "floor"):
        p50 = statistics.median(got[name])
        print(f"  {name:5s} {p50:.3f} (added {p50 - direct:+.3f})")


async def timeline(args: argparse.Namespace, url: str, proc: subprocess.Popen[bytes]) -> None:
    async with httpx2.AsyncClient(timeout=30) as client:
        for _ in range(5):  # warm: the first requests load what the rest reuse
            await asyncio.wait_for(bench.first_facade(client, url), 30)
        proc.send_signal(signal.SIGHUP)  # the warm-up's timeline, printed and dropped
        await asyncio.sleep(0.3)
        took = []
        for _ in range(args.runs):
            await asyncio.sleep(args.gap)
            took.append(await asyncio.wait_for(bench.first_facade(client, url), 30) * 1000)
        print(f"facade first token p50 at the client: {statistics.median(took):.3f} ms")
        proc.send_signal(signal.SIGHUP)
        await asyncio.sleep(0.5)


def client_main(args: argparse.Namespace) -> None:
    ports = {name: bench.free_port() for name in ("upstream", "pipe", "floor", "server")}
    up = str(ports["upstream"])
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready.json"
        server_argv = [
            *[__file__, "--role", "server", "--port", str(ports["server"])],
            *["--upstream-port", up, "--home", str(Path(tmp) / "home")],
            *["--ready", str(ready), "--streams", "2", "--store-interval", "0.2"],
            *["--loop", "auto", "--http", "auto"],
        ]
        procs = [
            spawn([bench.__file__, "--role", "upstream", "--port", up, "--chunks", "3"]),
            spawn([__file__, "--role", "pipe", "--port", str(ports["pipe"]), "--upstream", up]),
            spawn(
                [
                    *[bench.__file__, "--role", "floor", "--port", str(ports["floor"])],
                    *["--upstream-port", up, "--loop", "auto", "--http", "auto"],
                ]
            ),
            spawn(server_argv),
        ]
        try:
            limit = time.monotonic() + 120
            while not ready.exists():
                if time.monotonic() > limit or any(p.poll() is not None for p in procs):
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
            urls = {name: f"http://127.0.0.1:{ports[name]}" for name in ports}
            urls = {"direct": urls.pop("upstream"), **urls}
            server_url = urls.pop("server")
            asyncio.run(hop(args, urls))
            asyncio.run(timeline(args, server_url, procs[-1]))
        finally:
            bench.stop(procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--role", choices=["client", "server", "pipe"], default="client")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--gap", type=float, default=0.3, help="idle before each request (s)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", type=int, default=0)
    args, rest = parser.parse_known_args()
    if args.role == "pipe":
        import uvloop

        uvloop.run(serve_pipe(args.port, args.upstream))
    elif args.role == "server":
        install_stamps()
        signal.signal(signal.SIGHUP, report)
        sys.argv = [bench.__file__, "--role", "server", "--port", str(args.port), *rest]
        bench.main()
    else:
        client_main(args)


if __name__ == "__main__":
    main()
