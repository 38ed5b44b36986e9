from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tavernkit.text.macros import MacroEnv, MacroRegistry, register_builtins, render_macros
from tavernkit.text.variables import InMemoryVariables


@pytest.fixture
def make_env() -> Callable[..., MacroEnv]:
    def build(**kw: Any) -> MacroEnv:
        kw.setdefault("user", "User")
        kw.setdefault("char", "Character")
        kw.setdefault("variables", InMemoryVariables())
        kw.setdefault("clock", lambda: datetime(2024, 3, 5, 14, 7, 9, tzinfo=UTC))
        return MacroEnv(**kw)

    return build


@pytest.fixture
def render(make_env: Callable[..., MacroEnv]) -> Callable[..., str]:
    registry = register_builtins(MacroRegistry())

    def run(text: str, compat: str = "st-1.18", **kw: Any) -> str:
        env = kw.pop("env", None) or make_env(compat=compat, **kw)
        return render_macros(text, env, registry=registry).text

    return run
