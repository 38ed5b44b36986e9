"""A compiled world-info entry: every field coerced the way the scan reads it.

Compiling sets what ordering, indexing and the candidate loop read of every entry; the rest is
read from the entry's wire dict on first use (:meth:`CompiledEntry.__getattr__`), since a scan
checks only a few of a big book's entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tavernkit.jscompat import js_strict_eq, js_to_number, js_truthy
from tavernkit.worldinfo.hashing import entry_hash

__all__ = ["MATCH_FLAGS", "CompiledEntry", "new_entry", "opt_bool"]

MATCH_FLAGS = (
    ("matchPersonaDescription", 0),
    ("matchCharacterDescription", 1),
    ("matchCharacterPersonality", 2),
    ("matchCharacterDepthPrompt", 3),
    ("matchScenario", 4),
    ("matchCreatorNotes", 5),
)


def opt_bool(value: Any) -> bool | None:
    """``entry.x ?? global``: only null/undefined fall back; anything else counts by truthiness."""
    return None if value is None else js_truthy(value)


#: The fields :func:`_compile_entry` does not set; the first read of one fills them all.
_LAZY_FIELDS = frozenset(
    (
        "selective",
        "selective_logic",
        "position",
        "depth",
        "has_depth",
        "role",
        "outlet_name",
        "group_override",
        "group_weight",
        "use_group_scoring",
        "probability",
        "use_probability",
        "exclude_recursion",
        "prevent_recursion",
        "ignore_budget",
        "triggers",
        "filter_names",
        "filter_tags",
        "filter_exclude",
        "sticky",
        "cooldown",
        "position_code",
        "logic_code",
        "certain",
    )
)


@dataclass(slots=True, eq=False)
class CompiledEntry:
    """One entry with every field coerced the way the scan reads it (see SillyTavern §1.2)."""

    world: str
    uid: Any
    key_id: str  # "world.uid", the identity used by SillyTavern's maps and timed effects
    wire: dict[str, Any]
    content: str  # decorators stripped (SillyTavern's result)
    output_content: str  # what is emitted in default mode (decorator-only content -> "")
    decorators: tuple[str, ...]
    keys: tuple[str, ...]
    secondary: tuple[str, ...]
    selective: bool
    selective_logic: Any
    constant: bool
    disable: bool
    order: float
    position: Any
    depth: Any
    has_depth: bool
    role: Any
    outlet_name: Any
    group: str
    group_names: tuple[str, ...]
    group_override: bool
    group_weight: float
    use_group_scoring: bool | None
    probability: Any
    use_probability: bool
    scan_depth: Any
    case_sensitive: bool | None
    match_whole_words: bool | None
    match_mask: int
    exclude_recursion: bool
    prevent_recursion: bool
    delay_until_recursion: float  # 0 = off; ``true`` counts as 1
    ignore_budget: bool
    triggers: tuple[Any, ...]
    filter_names: tuple[Any, ...]
    filter_tags: tuple[Any, ...]
    filter_exclude: bool
    sticky: Any
    cooldown: Any
    delay: Any
    position_code: int  # 0..7 when ``position`` is exactly one of those numbers, else -1
    logic_code: int  # selectiveLogic ?? 0 when exactly 0..3, else -1 (no logic applies)
    certain: bool  # no probability roll: ``!useProbability || probability === 100``
    _hash: int | None = None

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise allow any attribute

        def __getattr__(self, name: str) -> Any:
            # Called only for a slot never set: the fields compiling leaves for first use.
            if name in _LAZY_FIELDS:
                _complete_entry(self)
                return object.__getattribute__(self, name)
            raise AttributeError(name)

    @property
    def hash(self) -> int:
        """cyrb53 of the entry's JSON as SillyTavern hashes it (computed on first use: only
        timed effects need it, and hashing is the costliest part of compiling)."""
        if self._hash is None:
            self._hash = entry_hash(self.wire, self.world, list(self.decorators), self.content)
        return self._hash


new_entry = object.__new__


def _complete_entry(e: CompiledEntry) -> None:
    """Fill the fields :func:`_compile_entry` left for first use, from the entry's wire."""
    wire = e.wire
    weight_raw = wire.get("groupWeight")
    cf = wire.get("characterFilter")
    names: tuple[Any, ...] = ()
    tags: tuple[Any, ...] = ()
    exclude = False
    if isinstance(cf, Mapping):
        if isinstance(cf.get("names"), list):
            names = tuple(cf["names"])
        if isinstance(cf.get("tags"), list):
            tags = tuple(cf["tags"])
        exclude = js_truthy(cf.get("isExclude"))
    triggers = wire.get("triggers")
    e.selective = js_truthy(wire.get("selective"))
    e.selective_logic = 0 if wire.get("selectiveLogic") is None else wire.get("selectiveLogic")
    e.position = wire.get("position")
    e.depth = wire.get("depth")
    e.has_depth = "depth" in wire
    e.role = wire.get("role")
    e.outlet_name = wire.get("outletName")
    e.group_override = js_truthy(wire.get("groupOverride"))
    e.group_weight = 100.0 if weight_raw is None else js_to_number(weight_raw)
    e.use_group_scoring = opt_bool(wire.get("useGroupScoring"))
    e.probability = wire.get("probability")
    e.use_probability = js_truthy(wire.get("useProbability"))
    e.exclude_recursion = js_truthy(wire.get("excludeRecursion"))
    e.prevent_recursion = js_truthy(wire.get("preventRecursion"))
    e.ignore_budget = js_truthy(wire.get("ignoreBudget"))
    e.triggers = tuple(triggers) if isinstance(triggers, list) else ()
    e.filter_names = names
    e.filter_tags = tags
    e.filter_exclude = exclude
    e.sticky = wire.get("sticky")
    e.cooldown = wire.get("cooldown")
    e.position_code = _position_code(wire.get("position"))
    e.logic_code = _logic_code(wire.get("selectiveLogic"))
    e.certain = not e.use_probability or js_strict_eq(e.probability, 100)


def _position_code(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return -1
    return int(value) if value in (0, 1, 2, 3, 4, 5, 6, 7) else -1


def _logic_code(value: Any) -> int:
    # ``entry.selectiveLogic ?? 0`` compared with === against 0..3.
    code = _position_code(0 if value is None else value)
    return code if code < 4 else -1
