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
from typing import Any

from tavernkit.jscompat import (
    JS_WHITESPACE,
    js_key_order,
    js_loose_true,
    js_string,
    js_to_number,
    js_truthy,
)
from tavernkit.worldinfo.columns import compile_plain
from tavernkit.worldinfo.decorators import parse_decorators
from tavernkit.worldinfo.entry import MATCH_FLAGS, CompiledEntry, new_entry
from tavernkit.worldinfo.gc_pause import gc_paused
from tavernkit.worldinfo.json_check import STR_TYPE, all_json, is_json

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

_DICT = frozenset((dict,))

#: Limits that turn absurd books into warnings instead of a stalled scan.
MAX_ENTRIES = 200_000
MAX_KEYS_PER_ENTRY = 1_000
MAX_KEY_CHARS = 10_000
MAX_CONTENT_CHARS = 5_000_000

_identity_digests = itertools.count()


@dataclass(slots=True, eq=False)
class CompiledBook:
    """A book's entries in SillyTavern's file order, plus the warnings compiling raised.

    ``digest`` identifies the content it was compiled from (see :func:`content_digest`). A
    plain book compiled without one (nothing asked for it yet) gets it on first use, from the
    entries as compiled: their wires are this book's own copies, and what they hold nested is
    checked against the snapshot taken when compiling (``_nested``); if the caller edited any
    of it in place since, the book gets a digest no other book has, so no copy ever finds it.
    """

    name: str
    entries: tuple[CompiledEntry, ...]
    warnings: tuple[str, ...] = ()
    compat: bool = True
    _digest: str | None = field(default=None, repr=False)
    #: For a digest left for later: the entries' keys, and the snapshot of their nested
    #: containers (``None`` when the entries are a dump nobody else holds).
    _raw_keys: tuple[str, ...] = field(default=(), repr=False)
    _nested: list[list[Any]] | None = field(default=None, repr=False)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def has_digest(self) -> bool:
        return self._digest is not None

    @property
    def digest(self) -> str:
        if self._digest is None:
            wires = [e.wire for e in self.entries]
            now: list[list[Any]] = []
            if self._nested is not None and not (all_json(wires, keep=now) and now == self._nested):
                self._digest = f"identity:{next(_identity_digests)}"  # edited since compiled
            else:
                self._digest = content_digest(
                    self.name, list(zip(self._raw_keys, wires, strict=True))
                )
            self._nested = None
        return self._digest


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
    if value.__class__ is list and STR_TYPE.issuperset(map(type, value)):
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
    ``checked``: ``raw`` is known to be JSON (checked with the whole book), but is copied."""
    if dumped and raw.__class__ is dict:
        wire = raw
    elif raw.__class__ is not dict and not isinstance(raw, Mapping):
        warnings.append(f"entry {name}.{raw_key}: not an object; skipped")
        return None
    else:
        wire = dict(raw)
        dumped = checked
    label = name + "." + raw_key
    content_raw = wire.get("content")
    if content_raw.__class__ is str:
        content_in = content_raw
    elif content_raw is None or content_raw is False or content_raw == "":
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
    if content_in.startswith("@@"):
        decorators, content = parse_decorators(content_in, compat=True)
        output_content = content if compat else parse_decorators(content_in, compat=False)[1]
    else:  # no decorators (parse_decorators would say so), without the call
        decorators, content, output_content = [], content_in, content_in
    uid = wire.get("uid")
    if not dumped and not is_json(wire):
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
    for flag, bit in MATCH_FLAGS:
        v = wire.get(flag)
        if v is not None and v is not False and js_truthy(v):
            mask |= 1 << bit
    # What ordering, indexing and the candidate loop read; the rest of the entry is read on
    # first use (see ``CompiledEntry.__getattr__``): a scan checks a few of a big book's entries.
    e: CompiledEntry = new_entry(CompiledEntry)
    e.world = name
    e.uid = uid
    e.key_id = f"{name}.{uid_text}"
    e.wire = wire
    e.content = content
    e.output_content = output_content
    e.decorators = tuple(decorators) if decorators else ()
    e.keys = keys
    e.secondary = secondary
    v = wire.get("constant")
    e.constant = v if v.__class__ is bool else js_truthy(v)
    v = wire.get("disable")
    e.disable = v if v.__class__ is bool else js_loose_true(v)
    e.order = order
    e.group = group
    e.group_names = group_names
    e.scan_depth = wire.get("scanDepth")
    v = wire.get("caseSensitive")
    e.case_sensitive = v if v is None or v.__class__ is bool else js_truthy(v)
    v = wire.get("matchWholeWords")
    e.match_whole_words = v if v is None or v.__class__ is bool else js_truthy(v)
    e.match_mask = mask
    e.delay_until_recursion = delay_level
    e.delay = wire.get("delay")  # every scan reads it of every entry (timed effects)
    e._hash = None
    return e


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
    with gc_paused():
        return _compile_entries(name, entries, warnings, compat, dumped, digest, order)


def _compile_entries(
    name: str,
    entries: Mapping[str, Any],
    warnings: list[str],
    compat: bool,
    dumped: bool,
    digest: str | None,
    order: list[str] | None,
) -> CompiledBook:
    if len(entries) > MAX_ENTRIES:
        warnings.append(f"{name}: more than {MAX_ENTRIES} entries; the rest skipped")
    compiled: list[CompiledEntry] = []
    seen: dict[str, str] = {}
    if order is None:
        order = js_key_order(entries)
    raws = [entries[k] for k in order[:MAX_ENTRIES]]
    snapshot: list[list[Any]] | None = [] if digest is None and not dumped else None
    checked = not dumped and all_json(raws, keep=snapshot)
    plain = None
    if checked or (dumped and _DICT.issuperset(map(type, raws))):
        plain = compile_plain(
            name,
            raws if dumped else list(map(dict, raws)),
            max_keys=MAX_KEYS_PER_ENTRY,
            max_key_chars=MAX_KEY_CHARS,
            max_content_chars=MAX_CONTENT_CHARS,
        )
    if plain is not None:
        compiled.extend(plain)  # no entry skipped, coerced or duplicated: no warning to add
        raws = []
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
    if digest is not None or warnings or plain is None or len(compiled) != len(order):
        if digest is None:  # the compiled entries do not spell the source: hash it now
            digest = content_digest(name, book_pairs(entries, order))
        return CompiledBook(name, tuple(compiled), tuple(warnings), compat, digest)
    # A plain book with every entry compiled: its digest waits until something asks for it.
    return CompiledBook(
        name, tuple(compiled), (), compat, None, tuple(order), None if dumped else snapshot
    )
