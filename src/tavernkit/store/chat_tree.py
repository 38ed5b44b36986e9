"""A chat as a tree of branches: which branch owns which message position, where two paths part,
and what a cut of the current path takes with it. Pure functions over the ``chat_branches`` rows
(migration 017); the store moves the rows (:mod:`tavernkit.store._sqlite_tree`).

A branch is a run of messages starting at position ``fork`` that continues its ``parent``'s
path from position ``fork - 1``; the root branch (``main``) starts at 0. The path of a branch is
its chain (root first, itself last): member ``i`` owns the positions from its fork up to the
next member's fork. A message therefore keeps its position whichever path shows it, and the
current path is what the ``messages`` table holds, as for a chat that never branched: every
read (windows, ranges, counters, search, the prompt) reads it unchanged. The messages of the
other paths are parked in ``branch_messages`` under the branch that owns them. Invariant: the
current branch has no parked messages (all its own are on the path), so an append always goes
to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = [
    "ROOT",
    "BranchRow",
    "Cut",
    "Squeeze",
    "chain",
    "cut_at",
    "divergence",
    "emptied",
    "owner_at",
    "segments",
    "spread",
    "squeeze",
]

#: the id of every tree's root branch (branch ids are per chat)
ROOT = "main"


@dataclass(frozen=True, slots=True)
class BranchRow:
    id: str
    parent: str | None
    #: the position of its first own message
    fork: int


def chain(branches: Mapping[str, BranchRow], branch_id: str) -> list[BranchRow]:
    """The branches whose messages make ``branch_id``'s path, root first."""
    out: list[BranchRow] = []
    current: str | None = branch_id
    while current is not None:
        row = branches[current]
        out.append(row)
        current = row.parent
    out.reverse()
    return out


def owner_at(path: Sequence[BranchRow], position: int) -> BranchRow:
    """The member of chain ``path`` that owns ``position`` on it."""
    found = path[0]
    for row in path:
        if row.fork <= position:
            found = row
    return found


def segments(path: Sequence[BranchRow], start: int = 0) -> list[tuple[str, int, int | None]]:
    """``(branch, first, stop)`` of each member's positions on the path from ``start`` on
    (``stop`` ``None``: to the end), empty runs left out."""
    out: list[tuple[str, int, int | None]] = []
    for i, row in enumerate(path):
        stop = path[i + 1].fork if i + 1 < len(path) else None
        first = max(start, row.fork)
        if stop is None or first < stop:
            out.append((row.id, first, stop))
    return out


def divergence(a: Sequence[BranchRow], b: Sequence[BranchRow]) -> int | None:
    """The first position at which the paths of chains ``a`` and ``b`` hold different
    messages; ``None`` when they are one path."""
    j = 0
    while j < len(a) and j < len(b) and a[j].id == b[j].id:
        j += 1
    forks = [c[j].fork for c in (a, b) if j < len(c)]
    return min(forks) if forks else None


@dataclass(frozen=True, slots=True)
class Cut:
    """What deleting the current path's messages from a position takes from the tree."""

    #: branches whose parked messages all go (they continue a deleted message)
    unpark: frozenset[str]
    #: branches that go (all their own messages went)
    drop: frozenset[str]
    #: the current branch afterwards
    current: str


def cut_at(branches: Mapping[str, BranchRow], current: str, position: int) -> Cut:
    """The tree after the current path loses its messages from ``position`` on: every branch
    whose path goes through a deleted message loses its messages after it, and a branch left
    with none goes, except a member of the current chain forking exactly at ``position`` (it
    stays, empty, as the current branch, so its parent's parked continuation stays reachable
    and a new message goes to a branch of its own)."""
    here = chain(branches, current)
    unpark: set[str] = set()
    drop: set[str] = set()
    for row in branches.values():
        parted = divergence(chain(branches, row.id), here)
        if parted is not None and parted <= position:
            continue  # its path leaves the current one before the cut
        if row.id != current:
            unpark.add(row.id)
        if row.fork > position and row.id != ROOT:
            drop.add(row.id)
    survivors = [row for row in here if row.id not in drop]
    return Cut(frozenset(unpark), frozenset(drop), survivors[-1].id)


@dataclass(frozen=True, slots=True)
class Squeeze:
    """What deleting ``count`` messages from the middle of the current path does to the tree:
    every branch whose path went through them keeps its messages, moved up."""

    #: branch -> how far its parked messages move up
    shift: dict[str, int]
    #: branch -> its fork afterwards
    forks: dict[str, int]


def squeeze(branches: Mapping[str, BranchRow], current: str, position: int, count: int) -> Squeeze:
    """The tree after the current path loses messages ``position`` to ``position + count``
    (the later ones move up, as in a chat that never branched): a branch's messages move up by
    the number of deleted messages its path went through before them, and so do forks."""

    def moved(index: int, limit: int) -> int:
        return max(0, min(index, limit, position + count) - position)

    here = chain(branches, current)
    on_path = {row.id for row in here}
    shift: dict[str, int] = {}
    forks: dict[str, int] = {}
    for row in branches.values():
        parted = divergence(chain(branches, row.id), here)
        limit = position + count if parted is None else parted
        shift[row.id] = moved(limit, limit)
        if row.id in on_path:
            forks[row.id] = row.fork - moved(row.fork, row.fork)
        else:
            forks[row.id] = row.fork - shift[row.id]
    return Squeeze(shift, forks)


def spread(
    branches: Mapping[str, BranchRow], current: str, position: int, *, join: bool = False
) -> Squeeze:
    """The tree after a message is inserted into the current path at ``position`` (the
    later ones move down, as in a chat that never branched).

    Without ``join`` the inserted message is on the current path only: every branch whose
    path holds the message now at ``position`` moves down with it (its parked messages and
    its fork), the branches that part from the current path at or before ``position`` stay,
    and a member of the current chain forking exactly at ``position`` owns the new message.
    With ``join`` the message goes in before the branch point at ``position``: the branches
    parting there move down too and continue it (what putting back a deleted message
    needs, when they continued it before)."""
    here = chain(branches, current)
    shift: dict[str, int] = {}
    forks: dict[str, int] = {}
    for row in branches.values():
        parted = divergence(chain(branches, row.id), here)
        follows = parted is None or parted > position or (join and parted == position)
        shift[row.id] = 1 if follows else 0
        moves = row.fork > position or (join and row.fork == position and row.id != ROOT)
        forks[row.id] = row.fork + 1 if follows and moves else row.fork
    return Squeeze(shift, forks)


def emptied(
    branches: Mapping[str, BranchRow], current: str, parked: Mapping[str, int]
) -> list[str]:
    """The members of the current chain, between the root and the current branch, that own
    no message any more: none on the path (the next member forks where they do) and none
    parked (``parked``: branch -> how many). Such a branch is an empty node the path only
    passes through; its children can continue its parent instead."""
    here = chain(branches, current)
    return [
        row.id
        for row, after in pairwise(here[1:])
        if after.fork <= row.fork and not parked.get(row.id)
    ]
