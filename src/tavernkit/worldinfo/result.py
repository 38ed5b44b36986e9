"""What a world-info scan returns: every output position, in SillyTavern's order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tavernkit.worldinfo.explain import WorldInfoExplain

__all__ = [
    "ActivatedEntry",
    "DepthGroup",
    "ExampleEntry",
    "WorldInfoResult",
    "merge_authors_note",
]

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class ExampleEntry:
    """An example-messages entry: ``position`` 0 = before the examples, 1 = after."""

    position: int
    content: str


@dataclass(frozen=True, slots=True)
class DepthGroup:
    """@depth entries sharing a depth and role, joined by the prompt builder with ``\\n``.

    ``depth`` is the first entry's raw ``depth`` (``None`` when null, absent when the entry
    had no depth key), as SillyTavern records it.
    """

    depth: Any
    role: Any
    entries: tuple[str, ...]
    has_depth: bool = True

    def to_st(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.has_depth:
            out["depth"] = self.depth
        out["entries"] = list(self.entries)
        out["role"] = self.role
        return out


@dataclass(frozen=True, slots=True)
class ActivatedEntry:
    """One activated entry (in activation order) with the content that was emitted."""

    world: str
    uid: Any
    key: str
    content: str
    position: Any
    order: float
    depth: Any
    role: Any
    outlet_name: Any
    wire: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class WorldInfoResult:
    """The outputs of :func:`tavernkit.worldinfo.scan`.

    ``timed_state`` is the chat's new ``timedWorldInfo`` metadata (unchanged on a dry run);
    ``warnings`` name entries that were skipped or keys that could not run. ``explain`` is
    why each entry fired or not, recorded only when the scan was asked (``explain=True``).
    """

    before: str = ""
    after: str = ""
    examples: tuple[ExampleEntry, ...] = ()
    depth: tuple[DepthGroup, ...] = ()
    an_top: tuple[str, ...] = ()
    an_bottom: tuple[str, ...] = ()
    outlets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    activated: tuple[ActivatedEntry, ...] = ()
    timed_state: dict[str, Any] = field(default_factory=lambda: {"sticky": {}, "cooldown": {}})
    overflowed: bool = False
    loops: int = 0
    warnings: tuple[str, ...] = ()
    explain: WorldInfoExplain | None = field(default=None, compare=False, repr=False)

    @property
    def activated_keys(self) -> list[str]:
        return [a.key for a in self.activated]

    @property
    def world_info_string(self) -> str:
        """``worldInfoString`` (before + after, no separator, as SillyTavern builds it)."""
        return self.before + self.after

    def to_st(self) -> dict[str, Any]:
        """The result in SillyTavern's shape (``checkWorldInfo``'s fields plus ``activated``)."""
        return {
            "worldInfoBefore": self.before,
            "worldInfoAfter": self.after,
            "EMEntries": [{"position": e.position, "content": e.content} for e in self.examples],
            "WIDepthEntries": [g.to_st() for g in self.depth],
            "ANBeforeEntries": list(self.an_top),
            "ANAfterEntries": list(self.an_bottom),
            "outletEntries": {k: list(v) for k, v in self.outlets.items()},
            "activated": self.activated_keys,
        }


def merge_authors_note(
    top: tuple[str, ...] | list[str], note: str, bottom: tuple[str, ...] | list[str]
) -> str:
    """The Author's Note text with AN-top/bottom entries around it, as SillyTavern builds it
    when the note fires this turn: ``top\\nnote\\nbottom`` minus one leading and one trailing
    newline."""
    text = "\n".join(top) + "\n" + note + "\n" + "\n".join(bottom)
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text
