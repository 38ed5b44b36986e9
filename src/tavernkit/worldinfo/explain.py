"""Why each entry fired or did not: an optional record a scan keeps when ``explain=True``.

The scan itself stays the source of truth: the recorder is only told what the scan decided
(and, for key matches, which key the scan's own matcher found), so an explanation can never
disagree with the activations. Off by default, because the hot path must not pay for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.worldinfo.compile import CompiledEntry
from tavernkit.worldinfo.regex_keys import parse_regex_key

__all__ = [
    "CHECK_REASONS",
    "FIRED_REASONS",
    "LOGIC_NAMES",
    "EntryReason",
    "ExplainRecorder",
    "WorldInfoExplain",
]

# What the scan's entry check returns: > 0 the entry activates (and how), <= 0 it does not
# (and why). Ints cost the hot path nothing over bools and let ``explain=True`` say why.
CHECK_DECORATOR, CHECK_FORCED, CHECK_CONSTANT, CHECK_STICKY, CHECK_KEY = 1, 2, 3, 4, 5
CHECK_NO_MATCH, CHECK_DISABLED, CHECK_TRIGGER, CHECK_CHAR_FILTER, CHECK_TAG_FILTER = (
    0,
    -1,
    -2,
    -3,
    -4,
)
CHECK_DELAY, CHECK_COOLDOWN, CHECK_DELAY_RECURSION, CHECK_EXCLUDE_RECURSION = -5, -6, -7, -8
CHECK_DONT_ACTIVATE, CHECK_SECONDARY = -9, -10
CHECK_REASONS = {
    CHECK_DECORATOR: ("decorator", "@@activate decorator"),
    CHECK_FORCED: ("forced", "forced activation"),
    CHECK_CONSTANT: ("constant", "constant"),
    CHECK_STICKY: ("sticky", "sticky (a timed effect from an earlier turn)"),
    CHECK_NO_MATCH: ("no_match", "no primary key matched"),
    CHECK_DISABLED: ("disabled", "disabled"),
    CHECK_TRIGGER: ("trigger", "not triggered by this generation type"),
    CHECK_CHAR_FILTER: ("character_filter", "the character filter excludes this character"),
    CHECK_TAG_FILTER: ("tag_filter", "the character filter excludes this character's tags"),
    CHECK_DELAY: ("delay", "delayed (timed effect)"),
    CHECK_COOLDOWN: ("cooldown", "on cooldown (timed effect)"),
    CHECK_DELAY_RECURSION: ("delay_until_recursion", "waits for a recursion pass"),
    CHECK_EXCLUDE_RECURSION: ("exclude_recursion", "excluded from recursion passes"),
    CHECK_DONT_ACTIVATE: ("dont_activate", "@@dont_activate decorator"),
}

#: SillyTavern's ``selectiveLogic`` numbers.
LOGIC_NAMES = {0: "AND_ANY", 1: "NOT_ALL", 2: "NOT_ANY", 3: "AND_ALL"}

#: Reason codes of an entry that fired; every other code says why it did not.
FIRED_REASONS = frozenset({"key", "constant", "sticky", "forced", "decorator"})


@dataclass(frozen=True, slots=True)
class EntryReason:
    """Why one entry fired (``fired``) or not, as the scan decided it.

    ``reason`` is a stable code for scripts, ``detail`` a sentence for people. Fired codes:
    ``key`` (``primary_key`` matched; ``secondary_keys`` satisfied ``logic``, empty when no
    secondary keys were needed), ``constant``, ``sticky``, ``forced``, ``decorator``
    (``@@activate``). Not fired: ``no_match`` (never a candidate or no primary key in view),
    ``secondary`` (primary matched, the selective logic failed), ``disabled``, ``trigger``,
    ``character_filter``, ``tag_filter``, ``delay``, ``cooldown``, ``delay_until_recursion``,
    ``exclude_recursion``, ``dont_activate``, ``duplicate``, ``probability`` (``roll`` >
    ``probability``), ``group`` (``group_winner`` took the group), ``budget`` (it overflowed
    the budget) and ``budget_skipped`` (the budget had already overflowed).

    ``loop`` is the recursion level the decision was made at (0 = the chat itself, n = the
    n-th recursion pass) and ``min_activations`` says the scan depth had been widened by the
    minimum-activations setting. ``position``/``order``/``depth``/``role`` are the entry's as
    the scan read them and ``content`` its content before macros, so a report needs no book.
    """

    key: str
    world: str
    uid: Any
    comment: str
    fired: bool
    reason: str
    detail: str
    position: Any = None
    order: float = 0
    depth: Any = None
    role: Any = None
    content: str = field(default="", repr=False)
    loop: int = 0
    min_activations: bool = False
    primary_key: str | None = None
    primary_regex: bool = False
    secondary_keys: tuple[str, ...] = ()
    logic: str | None = None
    group: str | None = None
    group_winner: str | None = None
    roll: float | None = None
    probability: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "world": self.world,
            "uid": self.uid,
            "comment": self.comment,
            "fired": self.fired,
            "reason": self.reason,
            "detail": self.detail,
            "loop": self.loop,
            "min_activations": self.min_activations,
            "position": self.position,
            "order": self.order,
            "depth": self.depth,
            "role": self.role,
        }
        if self.primary_key is not None:
            out["primary_key"] = self.primary_key
            out["primary_regex"] = self.primary_regex
        if self.logic is not None:
            out["secondary_keys"] = list(self.secondary_keys)
            out["logic"] = self.logic
        if self.group is not None:
            out["group"] = self.group
            out["group_winner"] = self.group_winner
        if self.roll is not None:
            out["roll"] = self.roll
            out["probability"] = self.probability
        return out


@dataclass(frozen=True, slots=True)
class WorldInfoExplain:
    """Every entry of the scanned books, in the scan's (sorted) order, with its reason."""

    entries: tuple[EntryReason, ...] = ()
    _by_key: dict[str, EntryReason] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._by_key:
            for r in self.entries:
                self._by_key.setdefault(r.key, r)

    def __iter__(self) -> Iterator[EntryReason]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> EntryReason | None:
        """The reason for ``"world.uid"`` (``None``: no such entry was scanned)."""
        return self._by_key.get(key)

    @property
    def fired(self) -> tuple[EntryReason, ...]:
        return tuple(r for r in self.entries if r.fired)

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.entries]


def _label(e: CompiledEntry) -> str:
    comment = e.wire.get("comment")
    return comment if isinstance(comment, str) and comment else e.key_id


class ExplainRecorder:
    """Collects reasons while a scan runs; :meth:`finish` freezes them.

    A later decision about the same entry replaces an earlier one (an entry that missed in the
    chat may fire from recursion), except that a fired entry stays fired.
    """

    def __init__(self, entries: Sequence[CompiledEntry]) -> None:
        self.entries = entries
        self.records: dict[int, EntryReason] = {}
        self.loop = 0
        self.min_activations = False

    def _record(self, i: int, reason: str, detail: str, **extra: Any) -> EntryReason:
        e = self.entries[i]
        comment = e.wire.get("comment")
        return EntryReason(
            key=e.key_id,
            world=e.world,
            uid=e.uid,
            comment=comment if isinstance(comment, str) else "",
            fired=reason in FIRED_REASONS,
            reason=reason,
            detail=detail,
            position=e.position,
            order=e.order,
            depth=e.depth,
            role=e.role,
            content=e.content,
            loop=self.loop,
            min_activations=self.min_activations,
            **extra,
        )

    def _set(self, i: int, reason: str, detail: str, **extra: Any) -> None:
        old = self.records.get(i)
        if old is not None and old.fired:
            return
        self.records[i] = self._record(i, reason, detail, **extra)

    def candidate(self, i: int, reason: str, detail: str, **extra: Any) -> None:
        """The entry's check in this loop: it passed (a fired code, pending the group,
        probability and budget steps) or failed (why)."""
        self._set(i, reason, detail, **extra)

    def check(self, i: int, code: int, *, has_primary: bool) -> None:
        """A check decided without keys (a flag, a filter, a timed effect, no key in view)."""
        reason, detail = CHECK_REASONS[code]
        if code == CHECK_NO_MATCH and not has_primary:
            detail = "no primary keys"
        self._set(i, reason, detail)

    def key_check(
        self,
        i: int,
        *,
        fired: bool,
        primary: str,
        primary_text: str,
        secondary: Sequence[tuple[str, bool]],
    ) -> None:
        """A primary key matched (``primary`` as written, ``primary_text`` as matched);
        ``secondary`` is each secondary key with whether it is present, empty when the entry
        needs none. ``fired``: the selective logic was satisfied."""
        regex = parse_regex_key(primary_text) is not None
        shown = f"key {primary!r}" + (" (regex)" if regex else "")
        if not secondary:
            self._set(i, "key", f"{shown} matched", primary_key=primary, primary_regex=regex)
            return
        code = self.entries[i].logic_code
        logic = LOGIC_NAMES.get(code, str(self.entries[i].selective_logic))
        hits = [k for k, hit in secondary if hit]
        # NOT_ALL / NOT_ANY are satisfied by the keys that are absent.
        absent = code in (1, 2)
        satisfied = [k for k, hit in secondary if hit != absent]
        if fired:
            names = ", ".join(repr(k) for k in satisfied)
            detail = f"{shown} matched, secondary {logic}: {'absent ' if absent else ''}{names}"
        else:
            found = ", ".join(repr(k) for k in hits) or "none"
            detail = f"{shown} matched but secondary {logic} failed (present: {found})"
        self._set(
            i,
            "key" if fired else "secondary",
            detail,
            primary_key=primary,
            primary_regex=regex,
            secondary_keys=tuple(satisfied),
            logic=logic,
        )

    def _demote(self, i: int, reason: str, detail: str, **extra: Any) -> None:
        # A candidate that passed its check but lost a later step: keep how it matched.
        old = self.records.get(i)
        base: dict[str, Any] = {}
        if old is not None:
            base = {
                "primary_key": old.primary_key,
                "primary_regex": old.primary_regex,
                "secondary_keys": old.secondary_keys,
                "logic": old.logic,
            }
            if old.fired:
                detail = f"{detail} (it had matched: {old.detail})"
        base.update(extra)
        self.records[i] = self._record(i, reason, detail, **base)

    def group_loss(self, i: int, group: str, why: str, winner: int | None) -> None:
        won = self.entries[winner] if winner is not None else None
        if won is not None:
            detail = f"lost inclusion group {group!r} to {_label(won)}: {why}"
        else:
            detail = f"dropped from inclusion group {group!r}: {why}"
        self._demote(
            i, "group", detail, group=group, group_winner=won.key_id if won is not None else None
        )

    def probability_failed(self, i: int, roll: float, probability: Any) -> None:
        self._demote(
            i,
            "probability",
            f"probability roll failed ({roll:.1f} > {probability})",
            roll=roll,
            probability=probability,
        )

    def budget(self, i: int, used: float, budget: float) -> None:
        self._demote(i, "budget", f"over the token budget ({used:g} of {budget:g} tokens)")

    def budget_skipped(self, i: int) -> None:
        self._demote(i, "budget_skipped", "not reached: the token budget had already overflowed")

    def finish(self, activated: set[int]) -> WorldInfoExplain:
        """Freeze the reasons; ``activated`` (entry indices) is the scan's final word, so a
        passed check that some later step dropped never reads as fired."""
        out: list[EntryReason] = []
        for i, e in enumerate(self.entries):
            found = self.records.get(i)
            if found is not None and found.fired and i not in activated:
                self._demote(i, "dropped", "dropped after its check")
                found = self.records[i]
            if found is None:
                self.loop, self.min_activations = 0, False
                if e.disable:
                    found = self._record(i, "disabled", "disabled")
                else:
                    found = self._record(i, "no_match", "no key matched")
            out.append(found)
        return WorldInfoExplain(tuple(out))
