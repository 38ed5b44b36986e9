"""Compile lorebooks into scan-ready entries, once per book content.

An entry is read from its SillyTavern wire dict (``LoreEntry.to_wire()`` or a raw world-info
JSON entry), never from model attribute names, so the hash that keys timed effects is computed
over exactly the JSON SillyTavern would hash. JS coercions are applied here, once, so the scan
loop only reads plain Python values. A malformed entry is skipped with a warning naming it;
it never fails the whole book.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.jscompat import (
    JS_WHITESPACE,
    js_key_order,
    js_loose_true,
    js_strict_eq,
    js_string,
    js_to_number,
    js_truthy,
)
from tavernkit.worldinfo.decorators import parse_decorators
from tavernkit.worldinfo.hashing import entry_hash

__all__ = [
    "MAX_ENTRIES",
    "MAX_KEY_CHARS",
    "CompiledBook",
    "CompiledEntry",
    "book_entries_wire",
    "compile_book",
]

#: Limits that turn absurd books into warnings instead of a stalled scan.
MAX_ENTRIES = 200_000
MAX_KEYS_PER_ENTRY = 1_000
MAX_KEY_CHARS = 10_000
MAX_CONTENT_CHARS = 5_000_000

_MATCH_FLAGS = (
    ("matchPersonaDescription", 0),
    ("matchCharacterDescription", 1),
    ("matchCharacterPersonality", 2),
    ("matchCharacterDepthPrompt", 3),
    ("matchScenario", 4),
    ("matchCreatorNotes", 5),
)


def _opt_bool(value: Any) -> bool | None:
    """``entry.x ?? global``: only null/undefined fall back; anything else counts by truthiness."""
    return None if value is None else js_truthy(value)


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

    @property
    def hash(self) -> int:
        """cyrb53 of the entry's JSON as SillyTavern hashes it (computed on first use: only
        timed effects need it, and hashing is the costliest part of compiling)."""
        if self._hash is None:
            self._hash = entry_hash(self.wire, self.world, list(self.decorators), self.content)
        return self._hash


@dataclass(slots=True, eq=False)
class CompiledBook:
    """A book's entries in SillyTavern's file order, plus the warnings compiling raised."""

    name: str
    digest: str
    entries: tuple[CompiledEntry, ...]
    warnings: tuple[str, ...] = ()
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)


def _digest(name: str, entries: Mapping[str, Any]) -> str:
    data = json.dumps(entries, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.blake2b((name + "\x00" + data).encode("utf-8", "surrogatepass")).hexdigest()


def book_entries_wire(book: Any, *, source: str = "<book>") -> tuple[Mapping[str, Any], list[str]]:
    """The ``entries`` mapping of a ``Lorebook`` model, a world-info dict, or a card
    ``character_book``-less world-info JSON; with warnings for what cannot be read."""
    warnings: list[str] = []
    if hasattr(book, "to_wire") and callable(book.to_wire):
        book = book.to_wire()
    if not isinstance(book, Mapping):
        return {}, [f"{source}: not a world-info object ({type(book).__name__}); book skipped"]
    entries = book.get("entries")
    if isinstance(entries, list):
        # Tolerate arrays (some exporters): SillyTavern would index them by position.
        entries = {str(i): e for i, e in enumerate(entries)}
    if not isinstance(entries, Mapping):
        return {}, [f"{source}: 'entries' is missing or not an object; book skipped"]
    return entries, warnings


def _str_list(value: Any) -> tuple[list[str], bool]:
    """A key list as SillyTavern sees it: a non-array is "no keys"; non-string items become
    their JS string form (SillyTavern's ``substituteParams`` stringifies them)."""
    if not isinstance(value, list):
        return [], value is not None
    out: list[str] = []
    bad = False
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif item is None:
            bad = True
        else:
            out.append(js_string(item))
            bad = True
    return out, bad


def _compile_entry(
    name: str, raw_key: str, raw: Any, warnings: list[str], compat: bool, dumped: bool = False
) -> CompiledEntry | None:
    """One entry. ``dumped``: ``raw`` is a fresh JSON-mode dump (a model's ``to_wire()``), so
    it is JSON by construction and nobody else holds it: neither checked nor copied."""
    if dumped and raw.__class__ is dict:
        wire = raw
    elif not isinstance(raw, Mapping):
        warnings.append(f"entry {name}.{raw_key}: not an object; skipped")
        return None
    else:
        wire = dict(raw)
        dumped = False
    label = f"{name}.{raw_key}"
    content_raw = wire.get("content")
    if content_raw is None or content_raw is False or content_raw == "":
        content_in = ""
    elif isinstance(content_raw, str):
        content_in = content_raw
    else:
        warnings.append(f"entry {label}: 'content' is not a string; skipped")
        return None
    if len(content_in) > MAX_CONTENT_CHARS:
        warnings.append(f"entry {label}: content longer than {MAX_CONTENT_CHARS} chars; skipped")
        return None
    keys, bad_keys = _str_list(wire.get("key"))
    secondary, bad_secondary = _str_list(wire.get("keysecondary"))
    if bad_keys or bad_secondary:
        warnings.append(f"entry {label}: keys must be a list of strings; non-strings coerced")
    if len(keys) + len(secondary) > MAX_KEYS_PER_ENTRY or any(
        len(k) > MAX_KEY_CHARS for k in (*keys, *secondary)
    ):
        warnings.append(f"entry {label}: absurd key list (count or length); skipped")
        return None
    decorators, content = parse_decorators(content_in, compat=True)
    output_content = content if compat else parse_decorators(content_in, compat=False)[1]
    uid = wire.get("uid")
    if not dumped and not _is_json(wire):
        warnings.append(f"entry {label}: holds a value that is not JSON; skipped")
        return None
    uid_text = "undefined" if "uid" not in wire else js_string(uid)
    order = js_to_number(wire.get("order"))
    if math.isnan(order):
        order = 0.0
    delay_rec = wire.get("delayUntilRecursion")
    if delay_rec is True:
        delay_level = 1.0
    elif js_truthy(delay_rec):
        delay_level = js_to_number(delay_rec)
        if math.isnan(delay_level):
            delay_level = 0.0
    else:
        delay_level = 0.0
    group_raw = wire.get("group")
    group = group_raw if isinstance(group_raw, str) else ""
    if group_raw is not None and not isinstance(group_raw, str):
        warnings.append(f"entry {label}: 'group' is not a string; ignored")
    group_names = tuple(g for g in _split_groups(group) if g)
    weight_raw = wire.get("groupWeight")
    weight = 100.0 if weight_raw is None else js_to_number(weight_raw)
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
    mask = 0
    for flag, bit in _MATCH_FLAGS:
        if js_truthy(wire.get(flag)):
            mask |= 1 << bit
    return CompiledEntry(
        world=name,
        uid=uid,
        key_id=f"{name}.{uid_text}",
        wire=wire,
        content=content,
        output_content=output_content,
        decorators=tuple(decorators),
        keys=tuple(keys),
        secondary=tuple(secondary),
        selective=js_truthy(wire.get("selective")),
        selective_logic=0 if wire.get("selectiveLogic") is None else wire.get("selectiveLogic"),
        constant=js_truthy(wire.get("constant")),
        disable=js_loose_true(wire.get("disable")),
        order=order,
        position=wire.get("position"),
        depth=wire.get("depth"),
        has_depth="depth" in wire,
        role=wire.get("role"),
        outlet_name=wire.get("outletName"),
        group=group,
        group_names=group_names,
        group_override=js_truthy(wire.get("groupOverride")),
        group_weight=weight,
        use_group_scoring=_opt_bool(wire.get("useGroupScoring")),
        probability=wire.get("probability"),
        use_probability=js_truthy(wire.get("useProbability")),
        scan_depth=wire.get("scanDepth"),
        case_sensitive=_opt_bool(wire.get("caseSensitive")),
        match_whole_words=_opt_bool(wire.get("matchWholeWords")),
        match_mask=mask,
        exclude_recursion=js_truthy(wire.get("excludeRecursion")),
        prevent_recursion=js_truthy(wire.get("preventRecursion")),
        delay_until_recursion=delay_level,
        ignore_budget=js_truthy(wire.get("ignoreBudget")),
        triggers=tuple(triggers) if isinstance(triggers, list) else (),
        filter_names=names,
        filter_tags=tags,
        filter_exclude=exclude,
        sticky=wire.get("sticky"),
        cooldown=wire.get("cooldown"),
        delay=wire.get("delay"),
        position_code=_position_code(wire.get("position")),
        logic_code=_logic_code(wire.get("selectiveLogic")),
        certain=not js_truthy(wire.get("useProbability"))
        or js_strict_eq(wire.get("probability"), 100),
    )


def _position_code(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return -1
    return int(value) if value in (0, 1, 2, 3, 4, 5, 6, 7) else -1


def _logic_code(value: Any) -> int:
    # ``entry.selectiveLogic ?? 0`` compared with === against 0..3.
    code = _position_code(0 if value is None else value)
    return code if code < 4 else -1


_SCALARS = frozenset((str, bool, int, float, type(None)))


def _is_json(value: Any, depth: int = 0) -> bool:
    if type(value) in _SCALARS:  # the common case, without isinstance chains
        return True
    if depth > 64:
        return False
    if value is None or isinstance(value, str | bool | int | float):
        return True
    # Plain loops, not all() over a generator: this walks every value of every entry.
    scalars = _SCALARS
    if isinstance(value, list):
        if depth >= 64:
            return not value  # any child would be deeper than 64 levels
        for v in value:  # noqa: SIM110 - a loop, see above
            if type(v) not in scalars and not _is_json(v, depth + 1):
                return False
        return True
    if isinstance(value, Mapping):
        if depth >= 64:
            return not value
        for k, v in value.items():
            if not isinstance(k, str) or (type(v) not in scalars and not _is_json(v, depth + 1)):
                return False
        return True
    return False


_GROUP_SPLIT = re.compile(",[" + re.escape(JS_WHITESPACE) + "]*")


def _split_groups(group: str) -> list[str]:
    # JS ``split(/,\s*/)`` with the JS white-space set.
    return _GROUP_SPLIT.split(group)


def compile_book(
    name: str, book: Any, *, compat: bool = True, source: str | None = None
) -> CompiledBook:
    """Compile one book (a ``Lorebook`` model or a world-info dict) named ``name``.

    Entries keep SillyTavern's order (``Object.keys``: integer-like uids ascending, then the
    rest in file order). Two entries with the same ``uid`` both stay (SillyTavern scans both;
    the second activation of the same ``world.uid`` is then skipped) but raise a warning.
    """
    dumped = callable(getattr(book, "to_wire", None))
    entries, warnings = book_entries_wire(book, source=source or name)
    return _compile_entries(name, entries, warnings, compat=compat, dumped=dumped)


def _compile_entries(
    name: str,
    entries: Mapping[str, Any],
    warnings: list[str],
    *,
    compat: bool,
    dumped: bool,
    digest: str | None = None,
) -> CompiledBook:
    if len(entries) > MAX_ENTRIES:
        warnings.append(f"{name}: more than {MAX_ENTRIES} entries; the rest skipped")
    compiled: list[CompiledEntry] = []
    seen: dict[str, str] = {}
    for raw_key in js_key_order(entries)[:MAX_ENTRIES]:
        entry = _compile_entry(name, raw_key, entries[raw_key], warnings, compat, dumped)
        if entry is None:
            continue
        if entry.key_id in seen:
            warnings.append(
                f"entry {name}.{raw_key}: duplicate uid {js_string(entry.uid)} "
                f"(also under key {seen[entry.key_id]!r}); only one can activate"
            )
        else:
            seen[entry.key_id] = raw_key
        compiled.append(entry)
    if digest is None:
        digest = _digest(name, entries)
    return CompiledBook(name, digest, tuple(compiled), tuple(warnings))


class BookCache:
    """Compiled books keyed by (name, content digest, compat): compile once, reuse while the
    book is unchanged. Bounded, least-recently-used first out.

    A book whose content the caller already vouches for (:meth:`register`: a store record
    read by its revision, with the JSON it was validated from) is found by that digest without
    being dumped, and compiled from that JSON on a miss: the model's ``to_wire()`` of a big
    book costs more than compiling it.
    """

    def __init__(self, maxsize: int = 64) -> None:
        self._items: OrderedDict[tuple[str, str, bool], CompiledBook] = OrderedDict()
        self._by_identity: dict[int, tuple[Any, tuple[str, str, bool]]] = {}
        self._vouched: dict[int, tuple[Any, str, Mapping[str, Any]]] = {}
        self.maxsize = maxsize

    def _remember(self, book: Any, key: tuple[str, str, bool]) -> None:
        if len(self._by_identity) > 4 * self.maxsize:
            self._by_identity.clear()
        self._by_identity[id(book)] = (book, key)

    def clear(self) -> None:
        self._items.clear()
        self._by_identity.clear()
        self._vouched.clear()

    def knows(self, book: Any) -> bool:
        """Whether ``book`` (this very object) was compiled or registered here."""
        for known in (self._by_identity.get(id(book)), self._vouched.get(id(book))):
            if known is not None and known[0] is book:
                return True
        return False

    def register(self, book: Any, digest: str, wire: Mapping[str, Any]) -> None:
        """Vouch that ``book`` (a value, never edited in place) is ``wire``, the JSON it was
        validated from (so ``book.to_wire() == wire``, the models' lossless guarantee), whose
        content hash is ``digest``. ``wire`` must be fresh JSON (``json.loads`` output) that
        nobody edits: compiled entries keep its entry objects."""
        if len(self._vouched) > 4 * self.maxsize:
            self._vouched.clear()
        self._vouched[id(book)] = (book, "record:" + digest, wire)

    def get(self, name: str, book: Any, *, compat: bool) -> CompiledBook:
        """The compiled book. The same object passed again is not re-read (books are treated
        as values: after editing one in place, pass a copy, a ``CompiledBook`` or call
        :meth:`clear`); an equal copy is found by its content digest."""
        if isinstance(book, CompiledBook):
            return book
        known = self._by_identity.get(id(book))
        if known is not None and known[0] is book and known[1][0] == name and known[1][2] == compat:
            hit = self._items.get(known[1])
            if hit is not None:
                return hit
        vouched = self._vouched.get(id(book))
        if vouched is not None and vouched[0] is book:
            key = (name, vouched[1], compat)
            found = self._items.get(key)
            if found is None:
                entries, warnings = book_entries_wire(vouched[2], source=name)
                found = _compile_entries(
                    name, entries, warnings, compat=compat, dumped=True, digest=vouched[1]
                )
            self._keep(key, found)
            self._remember(book, key)
            return found
        dumped = callable(getattr(book, "to_wire", None))
        entries, warnings = book_entries_wire(book, source=name)
        key = (name, _digest(name, entries), compat)
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            self._remember(book, key)
            return hit
        # The entries just read, not a second ``to_wire()`` of a model book.
        compiled = _compile_entries(
            name, entries, warnings, compat=compat, dumped=dumped, digest=key[1]
        )
        self._keep(key, compiled)
        self._remember(book, key)
        return compiled

    def _keep(self, key: tuple[str, str, bool], compiled: CompiledBook) -> None:
        self._items[key] = compiled
        self._items.move_to_end(key)
        if len(self._items) > self.maxsize:
            self._items.popitem(last=False)
