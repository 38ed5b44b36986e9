"""The routers' order is free to put the hot routes first: no two routes of the app answer
the same method and path, so whichever comes first, a request reaches the same route."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Match

from tavernkit.server.app import create_app
from tavernkit.server.routes import ROUTERS, openai, turns
from tavernkit.server.settings import ServerSettings

_PARAM = re.compile(r"{([^}:]+)(:[^}]+)?}")


def _routes() -> list[APIRoute]:
    return [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]


def _sample(route: APIRoute) -> str:
    # "path" parameters take slashes; a plain one is one segment
    return _PARAM.sub(lambda m: "a/b" if m.group(2) == ":path" else "x1", route.path)


def test_no_two_routes_answer_the_same_method_and_path() -> None:
    routes = _routes()
    assert len(routes) > 100
    clashes = []
    for route in routes:
        path = _sample(route)
        for method in sorted(route.methods):
            scope = {"type": "http", "method": method, "path": path, "root_path": ""}
            full = [r for r in routes if r.matches(dict(scope))[0] == Match.FULL]
            if full != [route]:
                clashes.append((method, route.path, [r.path for r in full]))
    assert clashes == []


def test_the_turn_and_facade_routes_are_matched_first() -> None:
    assert ROUTERS[:2] == (turns.router, openai.router)


def test_the_facades_completions_go_through_the_middleware_and_are_documented(
    tmp_path: Path,
) -> None:
    app = create_app(ServerSettings(home=tmp_path))
    seen: list[tuple[str, str]] = []

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:  # a middleware added later
        seen.append((request.method, request.url.path))
        return await call_next(request)

    # the OpenAPI document keeps the router's route, request schema and all
    operation = app.openapi()["paths"]["/v1/chat/completions"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["required"] == [
        "model",
        "messages",
    ]
    with TestClient(app) as client:
        answered = client.post("/v1/chat/completions", content=b"{not json")
        other = client.get("/v1/chat/completions")  # another method: the app's typed 405
    assert answered.status_code in (400, 401, 403)  # answered by the route
    assert set(answered.json()["error"]) >= {"message", "type", "code"}  # OpenAI's shape
    assert other.status_code == 405
    assert seen == [("POST", "/v1/chat/completions"), ("GET", "/v1/chat/completions")]


def test_a_body_over_the_cap_is_refused_in_each_routes_shape(tmp_path: Path) -> None:
    app = create_app(ServerSettings(home=tmp_path, upload_max_bytes=1024))
    big = b"x" * 2048
    with TestClient(app) as client:
        facade = client.post("/v1/chat/completions", content=big)
        other = client.post("/characters", content=big)
    assert facade.status_code == other.status_code == 413
    assert facade.json()["error"]["code"] == "request_too_large"  # OpenAI's shape
    assert other.json()["error"]["type"] == "LimitExceeded"  # the server's
