"""Chat and global variables: ``/setvar``, ``/getvar``, ``/addvar``, ``/incvar``, ``/decvar``,
``/flushvar``, their ``global`` twins and ``/listvar`` (SillyTavern's ``variables.js`` rules:
values stored as given, numbers after add/inc/dec, numeric text read back as a number,
``index=`` inside JSON lists and objects)."""

from __future__ import annotations

import json
import math
from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.jscompat import js_json_stringify, js_string, js_to_number
from tavernkit.stscript.commands.returns import do_return
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import (
    UNSET,
    convert_value_type,
    numeric_or_text,
    pipe_text,
)
from tavernkit.text.variables import Scope as VarScope
from tavernkit.text.variables import add_values

__all__ = ["register"]


def _name(call: CommandCall) -> str:
    key = call.arg("key")
    if key is None:
        key = call.arg("name")
    return pipe_text(key) if key is not None else ""


def _value(call: CommandCall) -> Any:
    value = call.value
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(pipe_text(v) for v in value)
    return value if isinstance(value, str) else pipe_text(value)


def _parse(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return UNSET


def _index_key(container: Any, index: Any) -> Any:
    number = js_to_number(index)
    if isinstance(container, list) and not math.isnan(number) and float(number).is_integer():
        return int(number)
    return js_string(index)


def set_variable(call: CommandCall, scope: VarScope, name: str, value: Any) -> Any:
    """``setLocalVariable`` / ``setGlobalVariable``."""
    if not name:
        raise ScriptError("Variable name cannot be empty or undefined.")
    store = call.host.variables
    index = call.arg("index")
    if index is not None:
        stored = store.get(name, scope) if store.has(name, scope) else None
        current = _parse(stored if stored is not None and stored != "" else "null")
        if current is UNSET:
            current = _parse(js_json_stringify(stored)) if not isinstance(stored, str) else UNSET
        if current is UNSET:
            return value
        number = js_to_number(index)
        converted = convert_value_type(value, call.arg("as"))
        if math.isnan(number):
            if current is None:
                current = {}
            if isinstance(current, dict):
                if converted is UNSET:
                    current.pop(js_string(index), None)
                else:
                    current[js_string(index)] = converted
        else:
            if current is None:
                current = []
            if isinstance(current, list) and float(number).is_integer() and number >= 0:
                while len(current) <= int(number):
                    current.append(None)
                current[int(number)] = None if converted is UNSET else converted
            elif isinstance(current, dict):
                current[js_string(index)] = converted
        store.set(name, js_json_stringify(current), scope)
    else:
        store.set(name, value, scope)
    return value


def get_variable(call: CommandCall, scope: VarScope, name: str) -> Any:
    """``getLocalVariable`` / ``getGlobalVariable`` (numeric text comes back as a number)."""
    store = call.host.variables
    key = call.arg("key")
    name = pipe_text(key) if key is not None else name
    value: Any = store.get(name, scope) if store.has(name, scope) else None
    index = call.arg("index")
    if index is not None:
        parsed = _parse(value) if isinstance(value, str) else value
        if parsed is not UNSET and parsed is not None:
            if isinstance(parsed, list | dict):
                key_ = _index_key(parsed, index)
                if isinstance(parsed, list):
                    value = (
                        parsed[key_] if isinstance(key_, int) and 0 <= key_ < len(parsed) else None
                    )
                else:
                    value = parsed.get(key_)
                if isinstance(value, dict | list) or (value is None and _present(parsed, key_)):
                    value = js_json_stringify(value)
            else:
                value = None
    return numeric_or_text(value)


def _present(container: Any, key: Any) -> bool:
    if isinstance(container, list):
        return isinstance(key, int) and 0 <= key < len(container)
    return isinstance(container, dict) and key in container


def add_variable(call: CommandCall, scope: VarScope, name: str, value: Any) -> Any:
    """``addLocalVariable``: push onto a JSON list, add numbers, else append text."""
    if not name:
        raise ScriptError("Variable name cannot be empty or undefined.")
    store = call.host.variables
    current = store.get(name, scope) if store.has(name, scope) else None
    result = add_values(current, value)
    store.set(name, result, scope)
    return result


def _setter(scope: VarScope) -> Any:
    def callback(call: CommandCall) -> Any:
        return set_variable(call, scope, _name(call), _value(call))

    return callback


def _getter(scope: VarScope) -> Any:
    def callback(call: CommandCall) -> Any:
        return get_variable(call, scope, _value(call))

    return callback


def _adder(scope: VarScope) -> Any:
    def callback(call: CommandCall) -> Any:
        return add_variable(call, scope, _name(call), _value(call))

    return callback


def _stepper(scope: VarScope, step: int) -> Any:
    def callback(call: CommandCall) -> Any:
        return add_variable(call, scope, _value(call), step)

    return callback


def _flusher(scope: VarScope) -> Any:
    def callback(call: CommandCall) -> Any:
        name = _value(call)
        if name:
            call.host.variables.delete(name, scope)
        return ""

    return callback


def _listvar(call: CommandCall) -> Any:
    store = call.host.variables
    listed = [{"key": k, "value": v, "scope": "local"} for k, v in store.local_vars.items()] + [
        {"key": k, "value": v, "scope": "global"} for k, v in store.global_vars.items()
    ]
    scope = (call.text("scope") or "all").strip().lower()
    shown = [v for v in listed if scope in ("all", "") or v["scope"] == scope]
    text = "\n".join(f"{v['key']}: {pipe_text(v['value'])}" for v in shown)
    return do_return(call, call.text("return") or "popup-html", listed, text)


def register(registry: CommandRegistry) -> None:
    reg = registry.register
    index_args = (
        "index",
        NamedArgSpec(
            "as",
            enum=(
                "string",
                "number",
                "int",
                "float",
                "bool",
                "list",
                "object",
                "null",
                "undefined",
            ),
        ),
    )
    for scope, suffix, alias in (("local", "var", "chatvar"), ("global", "globalvar", "")):

        def names(base: str, alias: str = alias) -> tuple[str, ...]:
            return (f"{base}{alias}",) if alias else ()

        reg(
            f"set{suffix}",
            _setter(scope),  # type: ignore[arg-type]
            aliases=names("set"),
            named_args=(NamedArgSpec("key", types=("variable",)), *index_args),
            help=f"Sets a {scope} variable; returns the value.",
        )
        reg(
            f"get{suffix}",
            _getter(scope),  # type: ignore[arg-type]
            aliases=names("get"),
            named_args=(NamedArgSpec("key", types=("variable",)), "index"),
            help=f"Reads a {scope} variable.",
        )
        reg(
            f"add{suffix}",
            _adder(scope),  # type: ignore[arg-type]
            aliases=names("add"),
            named_args=(NamedArgSpec("key", types=("variable",)),),
            help=f"Adds to a {scope} variable (list push, sum or text).",
        )
        reg(
            f"inc{suffix}",
            _stepper(scope, 1),  # type: ignore[arg-type]
            aliases=names("inc"),
            help=f"Adds 1 to a {scope} variable.",
        )
        reg(
            f"dec{suffix}",
            _stepper(scope, -1),  # type: ignore[arg-type]
            aliases=names("dec"),
            help=f"Subtracts 1 from a {scope} variable.",
        )
        reg(
            f"flush{suffix}",
            _flusher(scope),  # type: ignore[arg-type]
            aliases=names("flush"),
            help=f"Deletes a {scope} variable.",
        )
    reg(
        "listvar",
        _listvar,
        aliases=("listchatvar",),
        named_args=(
            NamedArgSpec("scope", enum=("all", "local", "global")),
            NamedArgSpec("return", default="popup-html"),
        ),
        unnamed_types=(),
        help="Lists the variables (return=object: a JSON list of {key, value, scope}).",
    )
