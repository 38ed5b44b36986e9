"""The routers' order is free to put the hot routes first: no two routes of the app answer
the same method and path, so whichever comes first, a request reaches the same route."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Match

from tavernkit.server.app import TavernApp, create_app
from tavernkit.server.body_limit import BodyLimit
from tavernkit.server.routes import AHEAD_OF_MIDDLEWARE, ROUTERS, openai, turns
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


def test_the_facades_completions_are_served_ahead_of_the_middleware_and_still_documented(
    tmp_path: Path,
) -> None:
    app = create_app(ServerSettings(home=tmp_path))
    assert isinstance(app, TavernApp)
    assert {("POST", "/v1/chat/completions"): openai.chat_completions} == AHEAD_OF_MIDDLEWARE
    assert set(app.ahead) == set(AHEAD_OF_MIDDLEWARE)
    ahead = app.ahead[("POST", "/v1/chat/completions")]
    assert isinstance(ahead, BodyLimit)  # the body cap holds there too
    # the OpenAPI document keeps the router's route, request schema and all
    operation = app.openapi()["paths"]["/v1/chat/completions"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["required"] == [
        "model",
        "messages",
    ]
    # another method on the path is the app's typed 405, as before
    with TestClient(app) as client:
        response = client.get("/v1/chat/completions")
    assert response.status_code == 405
