"""The routers' order is free to put the hot routes first: no two routes of the app answer
the same method and path, so whichever comes first, a request reaches the same route."""

from __future__ import annotations

import re

from fastapi.routing import APIRoute
from starlette.routing import Match

from tavernkit.server.routes import ROUTERS, openai, turns

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
