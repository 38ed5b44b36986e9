"""Scopes, closures and results: the run-time values of STscript.

A :class:`Scope` holds the scoped variables (``/let``, ``/var``, closure arguments), the scope
macros (``{{timesIndex}}``, ``{{arg::name}}``) and the pipe; lookups walk up to the parent.
A :class:`ScriptClosure` is a parsed closure bound to a scope: running it runs a *copy* of its
scope (so a second run starts clean) whose parent is the caller's scope; variables declared
inside do not leak, ``/var`` of an outer name changes the outer variable.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.jscompat import (
    is_true_boolean,
    js_json_stringify,
    js_string,
    js_to_number,
    js_trim,
    normalize_number,
)
from tavernkit.stscript.tree import ClosureNode

__all__ = [
    "BreakController",
    "ClosureResult",
    "Scope",
    "ScriptClosure",
    "convert_value_type",
    "js_parse_float",
    "js_parse_int",
    "numeric_or_text",
    "pipe_text",
]


_UNSET: Any = object()


class BreakController:
    __slots__ = ("is_break",)

    def __init__(self) -> None:
        self.is_break = False


@dataclass(slots=True)
class ClosureResult:
    """``SlashCommandClosureResult``: the pipe and how the run ended."""

    pipe: Any = None
    is_break: bool = False
    is_aborted: bool = False
    is_quietly_aborted: bool = False
    abort_reason: str | None = None
    is_error: bool = False
    error_message: str | None = None


def numeric_or_text(value: Any) -> Any:
    """SillyTavern's read rule: ``(v === '' || isNaN(Number(v))) ? (v || '') : Number(v)``."""
    if value is None or value is _UNSET:
        return ""
    if isinstance(value, ScriptClosure):
        return value
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, str) and value == "":
        return ""
    if isinstance(value, list | dict):
        number = js_to_number(js_string(value)) if isinstance(value, list) else math.nan
    else:
        number = js_to_number(value)
    if math.isnan(number):
        return value if value else ""
    return normalize_number(number)


def js_parse_int(value: Any) -> float:
    """``parseInt(value, 10)``: leading digits after white space and a sign, else NaN."""
    text = js_trim(js_string(value)) if value is not None else ""
    sign = 1
    if text[:1] in "+-" and text:
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    digits = ""
    for char in text:
        if "0" <= char <= "9":
            digits += char
        else:
            break
    return sign * float(int(digits)) if digits else math.nan


def convert_value_type(value: Any, kind: Any) -> Any:
    """``convertValueType``: the ``as=`` argument of ``/setvar``, ``/var`` …"""
    if not isinstance(kind, str) or not kind:
        return value
    match js_trim(kind).lower():
        case "string" | "str":
            return js_string(value)
        case "null":
            return None
        case "undefined" | "none":
            return _UNSET
        case "number":
            return normalize_number(js_to_number(value))
        case "int":
            return normalize_number(js_parse_int(value))
        case "float":
            return normalize_number(js_parse_float(value))
        case "boolean" | "bool":
            return is_true_boolean(js_string(value))
        case "list" | "array":
            parsed = _json(value)
            return parsed if isinstance(parsed, list) else []
        case "object" | "dict" | "dictionary":
            parsed = _json(value)
            return parsed if isinstance(parsed, dict | list) or parsed is None else {}
    return value


_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Infinity)")


def js_parse_float(value: Any) -> float:
    """``parseFloat(value)``: the leading number after white space, else NaN."""
    text = js_trim(js_string(value)) if value is not None else ""
    match = _FLOAT.match(text)
    return float(match.group(0).replace("Infinity", "inf")) if match else math.nan


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return _UNSET


def pipe_text(value: Any) -> str:
    """A value as text in a macro (``{{pipe}}``, ``{{var::x}}``): closures are ``[Closure]``."""
    if value is None or value is _UNSET:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, ScriptClosure):
        return "[Closure]"
    if isinstance(value, list | dict):
        return js_json_stringify(value)
    return js_string(value)


class Scope:
    """``SlashCommandScope``: variables, macros and the pipe, with a parent."""

    __slots__ = ("_pipe", "macros", "parent", "variables")

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.variables: dict[str, Any] = {}
        self.macros: dict[str, Any] = {}
        self._pipe: Any = _UNSET

    def copy(self) -> Scope:
        scope = Scope(self.parent)
        scope.variables = dict(self.variables)
        scope.macros = dict(self.macros)
        scope._pipe = self._pipe
        return scope

    @property
    def pipe(self) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if scope._pipe is not _UNSET:
                return scope._pipe
            scope = scope.parent
        return None

    @pipe.setter
    def pipe(self, value: Any) -> None:
        self._pipe = value

    def chain(self) -> Iterator[Scope]:
        scope: Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    # -- macros -----------------------------------------------------------------------------

    def macro_items(self) -> Iterator[tuple[str, Any]]:
        for scope in self.chain():
            yield from scope.macros.items()

    def set_macro(self, key: str, value: Any, *, overwrite: bool = True) -> None:
        if overwrite or all(k != key for k, _ in self.macro_items()):
            self.macros[key] = value

    # -- variables --------------------------------------------------------------------------

    def exists_in_scope(self, key: str) -> bool:
        return key in self.variables

    def exists(self, key: str) -> bool:
        return any(key in scope.variables for scope in self.chain())

    def let(self, key: str, value: Any = _UNSET) -> None:
        if key in self.variables:
            raise ScriptError(f'Variable named "{key}" already exists.')
        self.variables[key] = value

    def set(self, key: str, value: Any, index: Any = None, kind: Any = None) -> Any:
        for scope in self.chain():
            if key in scope.variables:
                if index is not None and index is not _UNSET:
                    current = scope.variables[key]
                    parsed = _json(current) if isinstance(current, str) else current
                    if parsed is _UNSET:
                        parsed = current
                    _assign_index(parsed, index, convert_value_type(value, kind))
                    scope.variables[key] = js_json_stringify(parsed)
                else:
                    scope.variables[key] = convert_value_type(value, kind)
                return value
        raise ScriptError(f'No such variable: "{key}"')

    def get(self, key: str, index: Any = None) -> Any:
        for scope in self.chain():
            if key in scope.variables:
                value = scope.variables[key]
                if index is not None and index is not _UNSET:
                    parsed = _json(value) if isinstance(value, str) else value
                    if parsed is _UNSET:
                        parsed = value
                    item = _read_index(parsed, index)
                    if isinstance(item, dict | list) or (
                        item is None and _has_index(parsed, index)
                    ):
                        return js_json_stringify(item)
                    return "" if item is None or item is _UNSET else item
                return numeric_or_text(value)
        raise ScriptError(f'No such variable: "{key}"')


def _key(container: Any, index: Any) -> Any:
    if isinstance(container, list):
        number = js_to_number(index)
        if math.isnan(number) or not float(number).is_integer():
            return None
        return int(number)
    return js_string(index)


def _has_index(container: Any, index: Any) -> bool:
    key = _key(container, index)
    if isinstance(container, list):
        return key is not None and 0 <= key < len(container)
    return isinstance(container, dict) and key in container


def _read_index(container: Any, index: Any) -> Any:
    key = _key(container, index)
    if isinstance(container, list):
        if key is not None and 0 <= key < len(container):
            return container[key]
        return _UNSET
    if isinstance(container, dict):
        return container.get(key, _UNSET)
    if isinstance(container, str):
        number = js_to_number(index)
        if not math.isnan(number) and float(number).is_integer() and 0 <= number < len(container):
            return container[int(number)]
    return _UNSET


def _assign_index(container: Any, index: Any, value: Any) -> None:
    key = _key(container, index)
    if isinstance(container, list):
        if key is None or key < 0:
            return
        while len(container) <= key:
            container.append(None)
        container[key] = None if value is _UNSET else value
    elif isinstance(container, dict):
        if value is _UNSET:
            container.pop(key, None)
        else:
            container[key] = value


@dataclass(slots=True)
class ScriptClosure:
    """A closure value: the parsed closure, its scope, and what a call gives it."""

    node: ClosureNode
    scope: Scope
    break_ctl: BreakController | None = None
    provided: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return "[Closure]"

    def bound(self, parent: Scope, break_ctl: BreakController | None) -> ScriptClosure:
        """This closure with its scope's parent set to ``parent`` (what SillyTavern does to
        a closure passed as an argument)."""
        scope = self.scope.copy()
        scope.parent = parent
        return ScriptClosure(self.node, scope, break_ctl, dict(self.provided))

    def run_copy(self) -> ScriptClosure:
        return ScriptClosure(self.node, self.scope.copy(), self.break_ctl, dict(self.provided))


UNSET = _UNSET
