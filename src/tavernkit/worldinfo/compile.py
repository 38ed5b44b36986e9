"""Compile lorebooks into scan-ready entries, once per book content.

An entry is read from its SillyTavern wire dict (``LoreEntry.to_wire()`` or a raw world-info
JSON entry), never from model attribute names, so the hash that keys timed effects is computed
over exactly the JSON SillyTavern would hash. JS coercions are applied here, once, so the scan
loop only reads plain Python values. A malformed entry is skipped with a warning naming it;
it never fails the whole book.
"""

from __future__ import annotations

import hashlib
import itertools
import marshal
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain, compress
from typing import TYPE_CHECKING, Any

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
    "book_pairs",
    "compile_book",
    "compile_entries",
    "content_digest",
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


_identity_digests = itertools.count()


@dataclass(slots=True, eq=False)
class CompiledBook:
    """A book's entries in SillyTavern's file order, plus the warnings compiling raised;
    ``digest`` identifies the content it was compiled from (see :func:`content_digest`)."""

    name: str
    digest: str
    entries: tuple[CompiledEntry, ...]
    warnings: tuple[str, ...] = ()
    compat: bool = True
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)


def content_digest(name: str, pairs: list[tuple[str, Any]]) -> str:
    """The content hash of a book: its ``(entries key, entry)`` pairs in SillyTavern's order.

    ``marshal`` format 0 writes exact builtin types only, with neither references nor
    interning flags, so its bytes depend on the values alone (``1``, ``1.0`` and ``True``
    differ, as they do in JSON) and equal bytes mean equal books; it is ~4x faster than
    ``json.dumps``. A book marshal cannot write (a non-JSON object, a ``str`` or ``dict``
    subclass) gets a digest of its own, so it is only ever found by identity.
    """
    try:
        data = marshal.dumps((name, pairs), 0)
    except ValueError:
        return f"identity:{next(_identity_digests)}"
    return hashlib.sha256(data).hexdigest()


def book_pairs(entries: Mapping[str, Any], order: list[str] | None = None) -> list[tuple[str, Any]]:
    """The pairs :func:`content_digest` reads, from a book's ``entries`` mapping (``order``:
    its keys in SillyTavern's order, when already known)."""
    return [(k, entries[k]) for k in (js_key_order(entries) if order is None else order)]


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


def _str_keys(value: Any) -> tuple[tuple[str, ...], bool]:
    """A key list as SillyTavern sees it: a non-array is "no keys"; non-string items become
    their JS string form (SillyTavern's ``substituteParams`` stringifies them)."""
    if value.__class__ is list and _STR.issuperset(map(type, value)):
        return tuple(value), False  # the common case, at C speed
    if not isinstance(value, list):
        return (), value is not None
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
    return tuple(out), bad


def _compile_entry(
    name: str,
    raw_key: str,
    raw: Any,
    warnings: list[str],
    compat: bool,
    dumped: bool = False,
    checked: bool = False,
) -> CompiledEntry | None:
    """One entry. ``dumped``: ``raw`` is a fresh JSON-mode dump (a model's ``to_wire()``), so
    it is JSON by construction and nobody else holds it: neither checked nor copied.
    ``checked``: ``raw`` is known to be JSON (:func:`_all_json`), but is copied."""
    if dumped and raw.__class__ is dict:
        wire = raw
    elif not isinstance(raw, Mapping):
        warnings.append(f"entry {name}.{raw_key}: not an object; skipped")
        return None
    else:
        wire = dict(raw)
        dumped = checked
    label = name + "." + raw_key
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
    keys, bad_keys = _str_keys(wire.get("key"))
    secondary, bad_secondary = _str_keys(wire.get("keysecondary"))
    if bad_keys or bad_secondary:
        warnings.append(f"entry {label}: keys must be a list of strings; non-strings coerced")
    if len(keys) + len(secondary) > MAX_KEYS_PER_ENTRY or (
        max(map(len, keys), default=0) > MAX_KEY_CHARS
        or max(map(len, secondary), default=0) > MAX_KEY_CHARS
    ):
        warnings.append(f"entry {label}: absurd key list (count or length); skipped")
        return None
    decorators, content = parse_decorators(content_in, compat=True)
    output_content = content if compat else parse_decorators(content_in, compat=False)[1]
    uid = wire.get("uid")
    if not dumped and not _is_json(wire):
        warnings.append(f"entry {label}: holds a value that is not JSON; skipped")
        return None
    if uid.__class__ is int and -(10**21) < uid < 10**21:
        uid_text = str(uid)  # JS prints such an integer the same way
    else:
        uid_text = "undefined" if "uid" not in wire else js_string(uid)
    order_raw = wire.get("order")
    if order_raw.__class__ is int:  # JSON's common case, without ``Number()``'s dispatch
        order = float(order_raw)
    else:
        order = js_to_number(order_raw)
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
    if group_raw == "" or group_raw is None:
        group = ""
        group_names: tuple[str, ...] = ()
    else:
        group = group_raw if isinstance(group_raw, str) else ""
        if not isinstance(group_raw, str):
            warnings.append(f"entry {label}: 'group' is not a string; ignored")
        group_names = tuple(g for g in _split_groups(group) if g)
    mask = 0
    for flag, bit in _MATCH_FLAGS:
        v = wire.get(flag)
        if v is not None and v is not False and js_truthy(v):
            mask |= 1 << bit
    # What ordering, indexing and the candidate loop read; the rest of the entry is read on
    # first use (see ``CompiledEntry.__getattr__``): a scan checks a few of a big book's entries.
    e: CompiledEntry = _new_entry(CompiledEntry)
    e.world = name
    e.uid = uid
    e.key_id = f"{name}.{uid_text}"
    e.wire = wire
    e.content = content
    e.output_content = output_content
    e.decorators = tuple(decorators) if decorators else ()
    e.keys = keys
    e.secondary = secondary
    e.constant = js_truthy(wire.get("constant"))
    e.disable = js_loose_true(wire.get("disable"))
    e.order = order
    e.group = group
    e.group_names = group_names
    e.scan_depth = wire.get("scanDepth")
    e.case_sensitive = _opt_bool(wire.get("caseSensitive"))
    e.match_whole_words = _opt_bool(wire.get("matchWholeWords"))
    e.match_mask = mask
    e.delay_until_recursion = delay_level
    e.delay = wire.get("delay")  # every scan reads it of every entry (timed effects)
    e._hash = None
    return e


_new_entry = object.__new__


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
    e.use_group_scoring = _opt_bool(wire.get("useGroupScoring"))
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


_SCALARS = frozenset((str, bool, int, float, type(None)))
_JSONISH = _SCALARS | {list, dict}
_CONTAINERS = frozenset((list, dict))
_STR = frozenset((str,))
#: Containers nested deeper than this are not JSON here (SillyTavern's files never come close).
_MAX_DEPTH = 64


def _all_json(entries: list[Any]) -> bool:
    """Whether every entry is JSON made of exact builtin types, checked level by level with
    C-level iteration (``map``/``chain``/``compress``), not a Python call per value: ~3x faster
    than :func:`_is_json` on each entry. ``False`` only means "check each entry"."""
    level = entries
    depth = 0
    while level:
        if depth >= _MAX_DEPTH - 4:  # deep books take the exact per-entry check
            return False
        dicts: list[dict[Any, Any]] = []
        lists: list[list[Any]] = []
        for c in level:
            cls = c.__class__
            if cls is dict:
                dicts.append(c)
            elif cls is list:
                lists.append(c)
            else:
                return False
        if dicts and not _STR.issuperset(map(type, chain.from_iterable(dicts))):
            return False
        values = list(chain(chain.from_iterable(map(dict.values, dicts)), *lists))
        types = list(map(type, values))
        kinds = set(types)
        if not kinds <= _JSONISH:
            return False
        level = (
            []
            if kinds.isdisjoint(_CONTAINERS)
            else list(compress(values, map(_CONTAINERS.__contains__, types)))
        )
        depth += 1
    return True


def _is_json(value: Any, depth: int = 0) -> bool:
    if type(value) in _SCALARS:  # the common case, without isinstance chains
        return True
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, str | bool | int | float):
        return True
    # Plain loops, not all() over a generator: this walks every value of every entry.
    scalars = _SCALARS
    if isinstance(value, list):
        if depth >= _MAX_DEPTH:
            return not value  # any child would be deeper than 64 levels
        for v in value:  # noqa: SIM110 - a loop, see above
            if type(v) not in scalars and not _is_json(v, depth + 1):
                return False
        return True
    if isinstance(value, Mapping):
        if depth >= _MAX_DEPTH:
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
    return compile_entries(name, entries, warnings, compat=compat, dumped=dumped)


def compile_entries(
    name: str,
    entries: Mapping[str, Any],
    warnings: list[str],
    *,
    compat: bool,
    dumped: bool,
    digest: str | None = None,
    order: list[str] | None = None,
) -> CompiledBook:
    """Compile a book's ``entries`` mapping (see :func:`compile_book`). ``dumped``: the entries
    are a fresh JSON dump nobody else holds (neither checked nor copied); ``digest``: the
    content hash the caller already knows; ``order``: ``js_key_order(entries)`` if known."""
    if len(entries) > MAX_ENTRIES:
        warnings.append(f"{name}: more than {MAX_ENTRIES} entries; the rest skipped")
    compiled: list[CompiledEntry] = []
    seen: dict[str, str] = {}
    if order is None:
        order = js_key_order(entries)
    raws = [entries[k] for k in order[:MAX_ENTRIES]]
    checked = not dumped and _all_json(raws)
    for raw_key, raw in zip(order, raws, strict=False):
        entry = _compile_entry(name, raw_key, raw, warnings, compat, dumped, checked)
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
        digest = content_digest(name, book_pairs(entries, order))
    return CompiledBook(name, digest, tuple(compiled), tuple(warnings), compat)
