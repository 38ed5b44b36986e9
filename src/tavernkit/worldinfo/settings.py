"""The ``world_info_*`` settings a scan reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tavernkit.jscompat import js_to_number, js_truthy
from tavernkit.models.settings import WORLD_INFO_ST_KEYS

__all__ = ["ScanSettings"]

_BOOL_FIELDS = {
    "include_names",
    "recursive",
    "overflow_alert",
    "case_sensitive",
    "match_whole_words",
    "use_group_scoring",
}


@dataclass(frozen=True, slots=True)
class ScanSettings:
    """SillyTavern's world-info settings (defaults: a new install, where recursion and whole
    words are on). ``budget`` is a percent of the max prompt tokens; ``budget_cap`` 0 = none.

    The fields are ``models.settings.WorldInfoSettings``'s scan fields under the same names
    (``WORLD_INFO_ST_KEYS``), held as JS numbers because SillyTavern coerces with ``Number()``."""

    depth: float = 2
    min_activations: float = 0
    min_activations_depth_max: float = 0
    budget: float = 25
    budget_cap: float = 0
    include_names: bool = True
    recursive: bool = True
    overflow_alert: bool = False
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    character_strategy: int = 1
    max_recursion_steps: float = 0

    @classmethod
    def from_st(cls, data: Mapping[str, Any]) -> ScanSettings:
        """From SillyTavern's ``world_info_*`` keys (``settings.json`` / ``getWorldInfoSettings``),
        with its coercions (``Number()``, ``Boolean()``) and the old-budget migration."""
        values: dict[str, Any] = {}
        for name, key in WORLD_INFO_ST_KEYS.items():
            if key not in data:
                continue
            raw = data[key]
            if name in _BOOL_FIELDS:
                values[name] = js_truthy(raw)
            elif name == "character_strategy":
                num = js_to_number(raw)
                values[name] = int(num) if num in (0.0, 1.0, 2.0) else 0
            else:
                values[name] = js_to_number(raw)
        if values.get("budget", 25) > 100:
            values["budget"] = 25
        return cls(**values)

    @classmethod
    def from_model(cls, obj: Any) -> ScanSettings:
        """From an object with the same attribute names (``tavernkit.models.settings.
        WorldInfoSettings``)."""
        values = {f.name: getattr(obj, f.name) for f in fields(cls) if hasattr(obj, f.name)}
        return cls(**values)

    @classmethod
    def coerce(cls, value: ScanSettings | Mapping[str, Any] | Any | None) -> ScanSettings:
        if value is None:
            return cls()
        if isinstance(value, ScanSettings):
            return value
        if isinstance(value, Mapping):
            if any(str(k).startswith("world_info_") for k in value):
                return cls.from_st(value)
            names = {f.name for f in fields(cls)}
            return cls(**{k: v for k, v in value.items() if k in names})
        return cls.from_model(value)
