"""Sticky / cooldown / delay timed effects (SillyTavern's ``WorldInfoTimedEffects``).

State is the chat metadata ``timedWorldInfo`` = ``{"sticky": {...}, "cooldown": {...}}`` with
records ``{"hash", "start", "end", "protected"}`` keyed by ``"world.uid"``; an entry is found by
its hash (see :mod:`tavernkit.worldinfo.hashing`). This class works on a deep copy: the caller's
state is never mutated, and a dry run returns the input unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from tavernkit.jscompat import js_string, js_to_number, js_truthy, normalize_number
from tavernkit.worldinfo.compile import CompiledEntry

__all__ = ["TimedEffects", "empty_timed_state"]


def empty_timed_state() -> dict[str, Any]:
    return {"sticky": {}, "cooldown": {}}


class TimedEffects:
    """Timed-effect bookkeeping for one scan over ``chat_length`` scan messages."""

    def __init__(
        self,
        state: Mapping[str, Any] | None,
        entries: Sequence[CompiledEntry],
        chat_length: int,
        *,
        dry_run: bool,
    ) -> None:
        self.dry_run = dry_run
        self.chat_length = chat_length
        self.entries = entries
        raw = copy.deepcopy(dict(state)) if isinstance(state, Mapping) else {}
        for kind in ("sticky", "cooldown"):
            records = raw.get(kind)
            if not isinstance(records, dict):
                records = {}
            raw[kind] = {k: v for k, v in records.items() if isinstance(v, dict) and v}
        self.state: dict[str, Any] = raw
        self.sticky: set[int] = set()
        self.cooldown: set[int] = set()
        self.delay: set[int] = set()
        self._by_key: dict[str, CompiledEntry] | None = None
        self._by_hash: dict[str, CompiledEntry] | None = None

    def _find(self, key: str, digest: Any) -> CompiledEntry | None:
        """SillyTavern's ``entries.find(x => String(x.hash) === String(value.hash))``. The entry
        stored under ``key`` is tried first so that a scan hashes only the entries it must."""
        wanted = js_string(digest)
        if self._by_key is None:
            self._by_key = {}
            for e in self.entries:
                self._by_key.setdefault(e.key_id, e)
        entry = self._by_key.get(key)
        if entry is not None and str(entry.hash) == wanted:
            first = self._by_hash_first(wanted, stop_at=entry)
            return first if first is not None else entry
        if self._by_hash is None:
            self._by_hash = {}
            for e in self.entries:
                self._by_hash.setdefault(str(e.hash), e)
        return self._by_hash.get(wanted)

    def _by_hash_first(self, wanted: str, stop_at: CompiledEntry) -> CompiledEntry | None:
        # An earlier entry can only share the hash if it has the same world and uid.
        for e in self.entries:
            if e is stop_at:
                return None
            if e.key_id == stop_at.key_id and str(e.hash) == wanted:
                return e
        return None

    def check(self) -> None:
        """Expire, keep or end stored effects (not on dry runs) and compute delays."""
        if not self.dry_run:
            self._check_kind("sticky")
            self._check_kind("cooldown")
        n = self.chat_length
        for entry in self.entries:
            if entry.delay is not None and js_truthy(entry.delay) and n < js_to_number(entry.delay):
                self.delay.add(entry.hash)

    def _check_kind(self, kind: str) -> None:
        records: dict[str, Any] = self.state[kind]
        active = self.sticky if kind == "sticky" else self.cooldown
        n = self.chat_length
        for key, value in list(records.items()):
            entry = self._find(key, value.get("hash"))
            if n <= js_to_number(value.get("start")) and not js_truthy(value.get("protected")):
                del records[key]
                continue
            if entry is None:
                if n >= js_to_number(value.get("end")):
                    del records[key]
                continue
            if not js_truthy(getattr(entry, kind)):
                del records[key]
                continue
            if n >= js_to_number(value.get("end")):
                del records[key]
                if kind == "sticky" and js_truthy(entry.cooldown):
                    self.state["cooldown"][entry.key_id] = self._record(entry, "cooldown", True)
                    self.cooldown.add(entry.hash)
                continue
            active.add(entry.hash)

    def _record(self, entry: CompiledEntry, kind: str, protected: bool) -> dict[str, Any]:
        n = self.chat_length
        return {
            "hash": entry.hash,
            "start": n,
            "end": normalize_number(n + js_to_number(getattr(entry, kind))),
            "protected": protected,
        }

    def set_effects(self, activated: Sequence[CompiledEntry]) -> None:
        """Start sticky/cooldown for newly activated entries (not on dry runs)."""
        if self.dry_run:
            return
        for entry in activated:
            if entry.sticky is None and entry.cooldown is None:
                continue
            for kind in ("sticky", "cooldown"):
                if not js_truthy(getattr(entry, kind)):
                    continue
                records = self.state[kind]
                if not records.get(entry.key_id):
                    records[entry.key_id] = self._record(entry, kind, False)
