"""Replays a ChatLuna prompt-renderer golden (``chatluna/README.md`` of the conformance folder)
on tavernkit's :class:`~tavernkit.text.render.ChatLunaRenderService`.

The recorder drove ChatLuna's own ``ChatLunaPromptRenderService`` (koishi-plugin-chatluna
1.3.36): every case's service has ChatLuna's built-ins and the whole test-provider catalogue
registered, the clock frozen at the case's ``now`` in its ``tz``, and ``Math.random`` replaying
``random.consumed`` (then mulberry32 from ``random.seed``). Here the same service is built with
the same catalogue, clock, zone and draws; ``url()`` reaches a real HTTP server on loopback that
serves the recorder's routes (the recorded URLs name port 38517; a transport sends them to
wherever this server listens).

Preset cases read the YAML with tavernkit's importer and render with the variables ChatLuna's
host computed from its Koishi session (``expected.render_variables``: the session is the host's,
not the renderer's).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx2

from tavernkit.errors import FormatError
from tavernkit.formats.chatluna import read_chatluna_preset
from tavernkit.groups.rng import Mulberry32
from tavernkit.jscompat import js_json_stringify, js_string
from tavernkit.models.chatluna import ChatLunaPreset
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render import ChatLunaRenderService, RenderOptions, UrlPolicy

from . import cases

FILE = Path("chatluna") / "cases.jsonl"
FAMILY = "chatluna"
RECORDED_PORT = 38517
KEYS = ("id", "category", "kind", "expected")
#: JavaScript engine messages (V8's text for a TypeError it raised itself) that name no
#: renderer behaviour; only the error type of such a golden is compared.
_ENGINE_MESSAGE_MARKERS = ("(intermediate value)", "is not a constructor")


# -- discovery -----------------------------------------------------------------------------------


def _number(text: str) -> int | float:
    """Integers beyond 2^53 are doubles to JavaScript: the value ChatLuna saw."""
    value = int(text)
    return float(value) if abs(value) > 2**53 else value


def discover(root: Path) -> list[cases.Case]:
    """One case per line of ``chatluna/cases.jsonl`` (split on ``\\n`` only: strings hold raw
    U+2028); a broken line becomes a failing case, never a skip."""
    path = root / FILE
    if not path.is_file():
        return []
    found: list[cases.Case] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not raw.strip():
            continue
        where = f"cases.jsonl:{number}"
        try:
            data = json.loads(raw, parse_int=_number)
        except json.JSONDecodeError as exc:
            found.append(
                cases.Case(where, FAMILY, path, problem=f"invalid JSON: {exc}", line=number)
            )
            continue
        case_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(case_id, str) or not case_id:
            found.append(
                cases.Case(where, FAMILY, path, problem="missing string 'id'", line=number)
            )
            continue
        missing = [key for key in KEYS if key not in data]
        problem = f"missing keys {missing}" if missing else None
        found.append(cases.Case(case_id, FAMILY, path, data=data, problem=problem, line=number))
    return found


# -- the recorder's deterministic world ----------------------------------------------------------


class ReplayedRandom:
    """``Math.random`` as recorded: the logged draws, then mulberry32 from the seed."""

    def __init__(self, consumed: list[float], seed: int) -> None:
        self._pending = list(consumed)
        self._after = Mulberry32(seed)

    def random(self) -> float:
        if self._pending:
            return self._pending.pop(0)
        return self._after()


def environment(data: Mapping[str, Any]) -> MacroEnv:
    now = datetime.fromisoformat(str(data.get("now") or "2025-03-09T18:30:45.123Z"))
    draws = data.get("random") or {}
    return MacroEnv(
        clock=lambda: now,
        tz=ZoneInfo(str(data.get("tz") or "Asia/Shanghai")),
        rng=ReplayedRandom(list(draws.get("consumed") or []), int(draws.get("seed") or 0)),
    )


@dataclass
class Counters:
    seq: int = 0
    ticks: int = 0
    countdown: int = 3
    vp_counter: int = 0


def _describe(value: Any) -> str:
    if callable(value):
        return "<function>"
    return js_json_stringify(value)


def function_catalogue(counters: Counters) -> dict[str, Callable[..., Any]]:
    """The README's test providers, ``(args, variables, configurable)``."""

    def seq(args: list[str], variables: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
        counters.seq += 1
        return str(counters.seq)

    async def slow(args: list[str], variables: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
        await asyncio.sleep(0.005)
        return "slow:" + "|".join(args)

    async def slowfail(
        args: list[str], variables: Mapping[str, Any], cfg: Mapping[str, Any]
    ) -> str:
        await asyncio.sleep(0.001)
        raise RuntimeError("slow boom")

    def fail(args: list[str], variables: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
        raise RuntimeError("boom")

    def getvar(args: list[str], variables: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
        name = args[0] if args else "undefined"
        if name not in variables:
            return "<undefined>"
        return _describe(variables[name])

    def cfg(args: list[str], variables: Mapping[str, Any], configurable: Mapping[str, Any]) -> str:
        key = args[0] if args else "conversationId"
        if key not in configurable:
            return "<none>"
        return js_string(configurable[key])

    def const(value: Any) -> Callable[..., Any]:
        return lambda args, variables, configurable: value

    return {
        "echo": lambda args, v, c: "|".join(args),
        "upper": lambda args, v, c: (args[0] if args else "").upper(),
        "concat": lambda args, v, c: "".join(args),
        "count": lambda args, v, c: str(len(args)),
        "json": lambda args, v, c: js_json_stringify(list(args)),
        "fail": fail,
        "slow": slow,
        "slowfail": slowfail,
        "num": const(42),
        "arr": lambda args, v, c: ["a", "b", "c"],
        "obj": lambda args, v, c: {"name": "Obj", "nested": {"k": "v"}, "list": [1, 2]},
        "nul": const(None),
        "undef": const(ChatLunaRenderService.UNDEFINED),
        "bool": const(False),
        "three": const("3"),
        "tmpl": const("{name}"),
        "getvar": getvar,
        "cfg": cfg,
        "seq": seq,
    }


def variable_provider_catalogue(counters: Counters) -> dict[str, Callable[[], Any]]:
    def counter() -> dict[str, Any]:
        value = counters.vp_counter
        counters.vp_counter += 1
        return {"n": value}

    async def provided_later() -> dict[str, Any]:
        return {"av": "async-provided"}

    def thunks() -> dict[str, Any]:
        return {"lazy": lambda: "lazy-value", "tick": value_catalogue(counters)["tick"]}

    async def async_lazy() -> str:
        return "async-lazy"

    def throws() -> dict[str, Any]:
        raise RuntimeError("provider boom")

    return {
        "vp_a": lambda: {"name": "ProvA", "pa": "A"},
        "vp_b": lambda: {"name": "ProvB", "pb": "B"},
        "vp_counter": counter,
        "vp_async": provided_later,
        "vp_thunk": thunks,
        "vp_thunk_async": lambda: {"alazy": async_lazy},
        "vp_throw": throws,
        "vp_null": lambda: None,
        "vp_date": lambda: {"date": "VAR-DATE", "weekday": "VAR-WEEKDAY"},
        "vp_list": lambda: {"items": ["p1", "p2"]},
    }


def value_catalogue(counters: Counters) -> dict[str, Callable[[], Any]]:
    def tick() -> str:
        counters.ticks += 1
        return f"tick{counters.ticks}"

    def countdown() -> int:
        value = counters.countdown
        counters.countdown = max(0, value - 1)
        return value

    async def asyncval() -> str:
        return "async-value"

    def thrower() -> str:
        raise RuntimeError("thunk boom")

    return {
        "lazy": lambda: "lazy-value",
        "tick": tick,
        "countdown": countdown,
        "asyncval": asyncval,
        "thrower": thrower,
        "retarr": lambda: ["x", "y"],
        "retobj": lambda: {"a": 1, "b": "two"},
    }


# -- the loopback server -------------------------------------------------------------------------

_ROUTES = {
    "/hello": (200, "Hello, world!"),
    "/long": (200, "L" * 1200 + "TAIL"),
    "/unicode": (200, "你好世界😀"),
    "/json": (200, '{"a":1,"b":[1,2]}'),
    "/notfound": (404, "no such page"),
    "/template": (200, "served {name}"),
}


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8") if length else ""
        if self.path == "/echo":
            status, text = 200, f"{self.command} {body}"
        else:
            status, text = _ROUTES.get(self.path, (404, "missing"))
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _answer

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def loopback_server() -> Iterator[int]:
    """The recorder's routes on a free loopback port (its port number)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class PortMap(httpx2.AsyncBaseTransport):
    """Sends requests for the recorded port to the live server; everything else as is."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.port == RECORDED_PORT:
            request.url = request.url.copy_with(port=self._port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


# -- running a case ------------------------------------------------------------------------------


class World:
    """The service of one case, with the catalogue registered as the recorder did."""

    def __init__(self, data: Mapping[str, Any], port: int) -> None:
        self.counters = Counters()
        self.functions = function_catalogue(self.counters)
        self.providers = variable_provider_catalogue(self.counters)
        self.values = value_catalogue(self.counters)
        policy = UrlPolicy(
            enabled=True,
            allowed_hosts=frozenset({"*"}),
            allow_private=True,
            methods=frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}),
        )
        self.service = ChatLunaRenderService(
            env=environment(data), url=policy, url_transport=PortMap(port)
        )
        for name, provider in self.functions.items():
            self.service.register_function_provider(name, provider)
        for name, catalogue_name in (data.get("register_functions") or {}).items():
            self.service.register_function_provider(name, self.functions[catalogue_name])
        for name, value in (data.get("statics") or {}).items():
            self.service.set_variable(name, value)
        for name in data.get("variable_providers") or ():
            self.service.register_variable_provider(self.providers[name])

    def variables(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        return {name: self._value(value) for name, value in (raw or {}).items()}

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"$fn"}:
            return self.values[value["$fn"]]
        return value

    def options(self, step: Mapping[str, Any]) -> RenderOptions:
        raw = step.get("options") or {}
        call_functions = {
            name: self.functions[catalogue_name]
            for name, catalogue_name in (step.get("call_functions") or {}).items()
        }
        call_providers = [
            self.providers[name] for name in step.get("call_variable_providers") or ()
        ]
        depth = raw.get("maxDepth", 10)
        return RenderOptions(
            extensions=(call_providers, call_functions),
            configurable=raw.get("configurable"),
            # JavaScript compares null as 0 (``0 >= null``: nothing renders)
            max_depth=0 if depth is None else depth,
        )


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": {"type": type(exc).__name__, "message": str(exc)}}


async def run_template(world: World, data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        result = await world.service.render_template(
            data["template"], world.variables(data.get("variables")), world.options(data)
        )
    except Exception as exc:
        return _error(exc)
    return {"text": result.text, "variables": result.variables}


async def run_messages(world: World, data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        messages = await world.service.render_messages(
            data["messages"], world.variables(data.get("variables")), world.options(data)
        )
    except Exception as exc:
        return _error(exc)
    return {"messages": messages}


async def run_service(world: World, data: Mapping[str, Any]) -> dict[str, Any]:
    service = world.service
    handles: dict[str, Callable[[], None]] = {}
    results: list[dict[str, Any]] = []
    for op in data["ops"]:
        kind = op["op"]
        if kind == "setVariable":
            service.set_variable(op["name"], op["value"])
            results.append({"ok": True})
        elif kind == "getVariable":
            value = service.get_variable(op["name"])
            results.append({"undefined": True} if value is None else {"value": value})
        elif kind == "removeVariable":
            service.remove_variable(op["name"])
            results.append({"ok": True})
        elif kind == "registerFunctionProvider":
            handle = service.register_function_provider(op["name"], world.functions[op["provider"]])
            handles[op["handle"]] = handle
            results.append({"ok": True, "disposer": "function" if callable(handle) else "?"})
        elif kind == "registerVariableProvider":
            handle = service.register_variable_provider(world.providers[op["provider"]])
            handles[op["handle"]] = handle
            results.append({"ok": True, "disposer": "function" if callable(handle) else "?"})
        elif kind == "dispose":
            handles[op["handle"]]()
            results.append({"ok": True})
        elif kind == "render":
            results.append(await run_template(world, op))
        else:
            raise cases.MalformedCase(f"unknown service operation {kind!r}")
    return {"results": results}


def loaded_view(preset: ChatLunaPreset) -> dict[str, Any]:
    """The parts of ChatLuna's ``loadPreset`` result a renderer decides."""
    note = preset.note
    return {
        "keywords": preset.keywords,
        "messages": [
            {"type": message["type"], "content": message["content"], "kind": prompt.type}
            for prompt, message in zip(preset.prompts, preset.messages(), strict=True)
        ],
        "format_user_prompt": preset.format_user_prompt,
        "authors_note": note.model_dump(mode="json") if note is not None else None,
    }


async def run_preset(world: World, data: Mapping[str, Any]) -> dict[str, Any]:
    expected = data["expected"]
    try:
        preset = read_chatluna_preset(data["preset_yaml"].encode("utf-8"), data["preset_file"])
    except FormatError as exc:
        return {"load_error": str(exc)}
    out: dict[str, Any] = {"loaded": loaded_view(preset)}
    variables = dict(expected["render_variables"])
    options = world.options(data)
    rendered = await world.service.render_preset_template(preset, variables, options)
    out["messages"] = rendered.messages
    out["variables"] = rendered.variables
    if "format_user_prompt" in expected:
        passed = expected["format_user_prompt"]["variables_passed"]
        system = {k: v for k, v in variables.items() if k != "prompt"}
        result = await world.service.render_template(
            preset.input_format,
            {**passed, "prompt": data["user_prompt"], **system},
            RenderOptions(configurable=options.configurable),
        )
        out["format_user_prompt"] = {"text": result.text, "variables": result.variables}
    if preset.note is not None and "authors_note" in expected:
        result = await world.service.render_template(preset.note.content, variables, options)
        out["authors_note"] = {"text": result.text, "variables": result.variables}
    return out


RUNNERS = {
    "template": run_template,
    "messages": run_messages,
    "service": run_service,
    "preset": run_preset,
}


async def run_case(data: Mapping[str, Any], port: int) -> dict[str, Any]:
    runner = RUNNERS.get(data["kind"])
    if runner is None:
        raise cases.MalformedCase(f"unknown kind {data['kind']!r}")
    return await runner(World(data, port), data)


def engine_message(message: str) -> bool:
    """Whether a recorded error message is V8's own wording rather than the renderer's."""
    return any(marker in message for marker in _ENGINE_MESSAGE_MARKERS)
