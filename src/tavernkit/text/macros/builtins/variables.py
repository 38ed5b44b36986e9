"""Variable macros: ``setvar addvar incvar decvar getvar hasvar deletevar`` and global forms."""

from __future__ import annotations

from tavernkit.text.macros.registry import ArgSpec, MacroCall, MacroRegistry
from tavernkit.text.variables import Scope

__all__ = ["register"]

_VALUE = ArgSpec("value", type=("string", "number"))


def _family(registry: MacroRegistry, scope: Scope, infix: str) -> None:
    def store(call: MacroCall):  # type: ignore[no-untyped-def]
        return call.evaluation.variables

    def set_(call: MacroCall) -> str:
        store(call).set(call.args[0], call.args[1], scope)
        return ""

    def add(call: MacroCall) -> str:
        store(call).add(call.args[0], call.args[1], scope)
        return ""

    def delete(call: MacroCall) -> str:
        store(call).delete(call.args[0], scope)
        return ""

    where = "global" if scope == "global" else "local"
    exists_alias = "globalvarexists" if scope == "global" else "varexists"
    flush_alias = "flushglobalvar" if scope == "global" else "flushvar"
    registry.register(
        f"set{infix}var",
        set_,
        args=["name", _VALUE],
        category="variable",
        description=f"Sets a {where} variable.",
    )
    registry.register(
        f"add{infix}var",
        add,
        args=["name", _VALUE],
        category="variable",
        description=f"Adds to a {where} variable (number, text or JSON list).",
    )
    registry.register(
        f"inc{infix}var",
        lambda c: store(c).inc(c.args[0], scope),
        args=["name"],
        category="variable",
        description=f"Adds 1 to a {where} variable.",
    )
    registry.register(
        f"dec{infix}var",
        lambda c: store(c).dec(c.args[0], scope),
        args=["name"],
        category="variable",
        description=f"Subtracts 1 from a {where} variable.",
    )
    registry.register(
        f"get{infix}var",
        lambda c: store(c).get(c.args[0], scope),
        args=["name"],
        category="variable",
        description=f"The value of a {where} variable.",
    )
    registry.register(
        f"has{infix}var",
        lambda c: "true" if store(c).has(c.args[0], scope) else "false",
        args=["name"],
        aliases=[exists_alias],
        category="variable",
        description=f"Whether a {where} variable exists.",
    )
    registry.register(
        f"delete{infix}var",
        delete,
        args=["name"],
        aliases=[flush_alias],
        category="variable",
        description=f"Deletes a {where} variable.",
    )


def register(registry: MacroRegistry) -> None:
    _family(registry, "local", "")
    _family(registry, "global", "global")
