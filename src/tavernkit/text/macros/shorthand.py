"""The variable shorthand ``{{.x}}`` / ``{{$x}}`` with its operators (SillyTavern 1.18):
``++ -- = += -= || ?? ||= ??= == != > >= < <=``. The value side is evaluated only when the
operator reads it, so the lazy operators do not run the macros of a value they skip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit.jscompat import js_to_number
from tavernkit.text.macros.output import is_falsy, normalize_result
from tavernkit.text.macros.parser import VarNode
from tavernkit.text.variables import Scope

if TYPE_CHECKING:
    from tavernkit.text.macros.evaluator import Evaluation

__all__ = ["eval_shorthand"]


def eval_shorthand(ev: Evaluation, node: VarNode, text: str) -> str:
    """``{{.name op value}}`` / ``{{$name op value}}``: read or change a local/global variable."""
    store = ev.variables
    name = node.name
    scope: Scope = "local" if node.scope == "local" else "global"
    op = node.op
    if not op:
        return normalize_result(store.get(name, scope))
    if op == "++":
        return normalize_result(store.inc(name, scope))
    if op == "--":
        return normalize_result(store.dec(name, scope))
    # The value is evaluated only when the operator reads it (``||``, ``??`` and their
    # assignments evaluate it lazily, like SillyTavern: its macros may have effects).
    if op == "||":
        current = store.get(name, scope)
        if is_falsy(current):
            return normalize_result(ev.var_value(node, text))
        return normalize_result(current)
    if op == "??":
        if store.has(name, scope):
            return normalize_result(store.get(name, scope))
        return ev.var_value(node, text)
    if op == "||=":
        current = store.get(name, scope)
        if is_falsy(current):
            value = ev.var_value(node, text)
            store.set(name, value, scope)
            return value
        return normalize_result(current)
    if op == "??=":
        if not store.has(name, scope):
            value = ev.var_value(node, text)
            store.set(name, value, scope)
            return value
        return normalize_result(store.get(name, scope))
    value = ev.var_value(node, text)
    if op == "=":
        store.set(name, value, scope)
        return ""
    if op == "+=":
        store.add(name, value, scope)
        return ""
    if op == "-=":
        number = js_to_number(value)
        if number != number:
            ev.warn(f'"-=" needs a number, got {value!r}')
        else:
            store.add(name, -number, scope)
        return ""
    if op == "==":
        return "true" if normalize_result(store.get(name, scope)) == value else "false"
    if op == "!=":
        return "true" if normalize_result(store.get(name, scope)) != value else "false"
    current = store.get(name, scope)
    left = js_to_number(current)
    right = js_to_number(value)
    if left != left or right != right:
        ev.warn(f'"{op}" needs numbers, got {current!r} and {value!r}')
        return "false"
    if op == ">":
        return "true" if left > right else "false"
    if op == ">=":
        return "true" if left >= right else "false"
    if op == "<":
        return "true" if left < right else "false"
    return "true" if left <= right else "false"
