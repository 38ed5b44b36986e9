"""Macro variables: the local (per chat) and global (per owner) scopes, with SillyTavern's rules.

SillyTavern keeps variables as JavaScript values and its variable code decides the type of a
result, so the same rules live here (``variables.js``):

- ``get`` returns a number when the stored value reads as one (``"007"`` gives 7), otherwise the
  string; a missing variable reads as ``""``.
- ``add`` pushes onto a value that parses as a JSON array (the pushed item keeps its own type:
  ``addvar::arr::3`` pushes the *string* ``"3"``); otherwise it adds numerically when both
  sides are numbers, else concatenates strings. A missing variable counts as 0.
- ``inc``/``dec`` are ``add(±1)`` and return the new value.
- ``set`` stores the value as given (macro arguments are strings), so types survive a round
  trip through the chat metadata exactly as SillyTavern writes them.

A store-backed implementation lives in ``tavernkit.store`` and implements the same protocol.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from tavernkit.jscompat import (
    js_json_stringify,
    js_string,
    js_to_number,
    js_trim,
    js_truthy,
    normalize_number,
)

__all__ = [
    "InMemoryVariables",
    "ReadOnlyVariables",
    "Scope",
    "VarValue",
    "VariableStore",
    "add_values",
    "read_value",
]

Scope = Literal["local", "global"]
#: A stored variable value: what SillyTavern keeps (strings, numbers; JSON arrays as strings).
VarValue = Any


def read_value(stored: VarValue) -> VarValue:
    """SillyTavern's ``get``: the stored value as a number when it reads as one."""
    if stored is None:
        return ""
    if stored.__class__ is str and len(stored) < 16 and stored.isdigit() and stored.isascii():
        return int(stored)  # the common case; 15 digits or fewer are exact as JS numbers
    if isinstance(stored, str) and not js_trim(stored):
        # Blank text stays text (SillyTavern prints "   " back, not 0).
        return stored
    number = js_to_number(stored)
    if math.isnan(number):
        return stored if js_truthy(stored) else ""
    return normalize_number(number)


def add_values(current_stored: VarValue, value: VarValue) -> VarValue:
    """The value ``add`` stores, given the stored value (None when missing) and the addend."""
    current = read_value(current_stored)
    if not js_truthy(current):
        current = 0
    text = js_string(current)
    parsed = None
    # Only a JSON array changes the meaning of add; anything else skips the parse.
    if text.lstrip(" \t\n\r").startswith("["):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
    if isinstance(parsed, list):
        parsed.append(value)
        return js_json_stringify(parsed)
    increment = js_to_number(value)
    current_number = js_to_number(current)
    if math.isnan(increment) or math.isnan(current_number):
        prefix = js_string(current) if js_truthy(current) else ""
        # A missing addend (None) appends nothing; String(null) would append "null".
        return prefix + ("" if value is None else js_string(value))
    total = current_number + increment
    if math.isnan(total):
        return ""
    return normalize_number(total)


@runtime_checkable
class VariableStore(Protocol):
    """Both variable scopes behind one interface (local = this chat, global = this owner)."""

    def get(self, name: str, scope: Scope = "local") -> VarValue: ...
    def set(self, name: str, value: VarValue, scope: Scope = "local") -> None: ...
    def add(self, name: str, value: VarValue, scope: Scope = "local") -> VarValue: ...
    def inc(self, name: str, scope: Scope = "local") -> VarValue: ...
    def dec(self, name: str, scope: Scope = "local") -> VarValue: ...
    def has(self, name: str, scope: Scope = "local") -> bool: ...
    def delete(self, name: str, scope: Scope = "local") -> None: ...
    def load_local(self, metadata: Mapping[str, Any]) -> None: ...
    def export_local(self) -> dict[str, Any]: ...


class InMemoryVariables:
    """Plain dictionaries; ``export_local()`` is what goes into ``chat_metadata.variables``."""

    __slots__ = ("global_vars", "local_vars")

    def __init__(
        self,
        local: Mapping[str, VarValue] | None = None,
        global_: Mapping[str, VarValue] | None = None,
    ) -> None:
        self.local_vars: dict[str, VarValue] = dict(local or {})
        self.global_vars: dict[str, VarValue] = dict(global_ or {})

    def _scope(self, scope: Scope) -> dict[str, VarValue]:
        return self.global_vars if scope == "global" else self.local_vars

    def get(self, name: str, scope: Scope = "local") -> VarValue:
        return read_value(self._scope(scope).get(name))

    def set(self, name: str, value: VarValue, scope: Scope = "local") -> None:
        self._scope(scope)[name] = value

    def add(self, name: str, value: VarValue, scope: Scope = "local") -> VarValue:
        data = self._scope(scope)
        result = add_values(data.get(name), value)
        data[name] = result
        return result

    def inc(self, name: str, scope: Scope = "local") -> VarValue:
        return self.add(name, 1, scope)

    def dec(self, name: str, scope: Scope = "local") -> VarValue:
        return self.add(name, -1, scope)

    def has(self, name: str, scope: Scope = "local") -> bool:
        return name in self._scope(scope)

    def delete(self, name: str, scope: Scope = "local") -> None:
        self._scope(scope).pop(name, None)

    def load_local(self, metadata: Mapping[str, Any]) -> None:
        """Take the local scope from a chat's metadata (its ``variables`` object)."""
        variables = metadata.get("variables")
        self.local_vars = dict(copy.deepcopy(variables)) if isinstance(variables, Mapping) else {}

    def export_local(self) -> dict[str, Any]:
        return copy.deepcopy(self.local_vars)


class ReadOnlyVariables:
    """A view that reads through to a store and drops every write (``skip_side_effects``).

    Writes compute what they would have returned (``incvar`` still prints the would-be value)
    but change nothing, so a ``{{getvar}}`` after a stripped ``{{setvar}}`` reads the old value.
    """

    __slots__ = ("_inner",)

    def __init__(self, inner: VariableStore) -> None:
        self._inner = inner

    def get(self, name: str, scope: Scope = "local") -> VarValue:
        return self._inner.get(name, scope)

    def set(self, name: str, value: VarValue, scope: Scope = "local") -> None:
        return None

    def add(self, name: str, value: VarValue, scope: Scope = "local") -> VarValue:
        current = self._inner.get(name, scope) if self._inner.has(name, scope) else None
        return add_values(current, value)

    def inc(self, name: str, scope: Scope = "local") -> VarValue:
        return self.add(name, 1, scope)

    def dec(self, name: str, scope: Scope = "local") -> VarValue:
        return self.add(name, -1, scope)

    def has(self, name: str, scope: Scope = "local") -> bool:
        return self._inner.has(name, scope)

    def delete(self, name: str, scope: Scope = "local") -> None:
        return None

    def load_local(self, metadata: Mapping[str, Any]) -> None:
        return None

    def export_local(self) -> dict[str, Any]:
        return self._inner.export_local()
