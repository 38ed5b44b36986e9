"""A chat's tree in SQLite (and PostgreSQL): forking at a message, switching the current path,
reading the branches, and trimming the tree when the current path loses messages.

The current path is the ``messages`` rows, as for any chat; the messages of the other paths
are parked in ``branch_messages`` (one row each: its id, position and JSON). A fork or a switch
moves only the messages past the point where the two paths part, a message keeps its id and
position wherever it is, and a chat that never branched has no tree rows at all. See
:mod:`tavernkit.store.chat_tree` for the shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from tavernkit.errors import FormatError, NotFound
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._chat_rows import chat_info
from tavernkit.store._message_rows import dumps, split_message
from tavernkit.store._sqlite_base import to_json_doc
from tavernkit.store._sqlite_chats import _marked_partial
from tavernkit.store._sqlite_swipes import SqliteSwipes
from tavernkit.store.chat_tree import (
    ROOT,
    BranchRow,
    chain,
    cut_at,
    divergence,
    emptied,
    owner_at,
    segments,
    spread,
    squeeze,
)
from tavernkit.store.chat_types import ChatBranch, ChatInfo, ChatTree, StoredMessage
from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["SqliteTree"]

Branches = dict[str, BranchRow]


class SqliteTree(SqliteSwipes):
    # -- reading ---------------------------------------------------------------------------
    async def _branches(self, db: SqliteConnection, chat_id: str) -> tuple[Branches, str]:
        """The chat's branch rows and its current branch (none and ``main`` when it never
        branched)."""
        rows = await db.execute_fetchall(
            "SELECT id, parent, fork, current FROM chat_branches WHERE chat_id = ?", (chat_id,)
        )
        branches: Branches = {}
        current = ROOT
        for r in rows:
            branches[r[0]] = BranchRow(r[0], r[1], int(r[2]))
            if r[3]:
                current = r[0]
        return branches, current

    async def chat_tree(self, ref: str, *, owner: str = DEFAULT_OWNER) -> ChatTree:
        async with self._read() as db:
            row = await self._chat_row(db, ref, owner)
            info = chat_info(row)
            branches, current = await self._branches(db, info.id)
            if not branches:
                greeting = await self._message_rows(
                    db, "WHERE chat_id = ? AND position = 0", (info.id,)
                )
                shown_first = greeting[0].data if greeting else None
                only = ChatBranch(ROOT, None, 0, info.message_count, shown_first, True)
                return ChatTree(info=info, current=ROOT, branches=[only])
            here = chain(branches, current)
            spans = {b: (first, stop) for b, first, stop in segments(here)}
            on_path = {b.id for b in here}
            # each branch's first message, and its message where another branch forks from it
            wanted = {(b.id, b.fork) for b in branches.values()}
            wanted |= {(b.parent, b.fork) for b in branches.values() if b.parent is not None}
            shown_at = {pos for b, pos in wanted if b in spans and _within(pos, *spans[b], info)}
            found: dict[tuple[str, int], dict[str, Any]] = {}
            if shown_at:
                marks = ",".join("?" * len(shown_at))
                for m in await self._message_rows(
                    db, f"WHERE chat_id = ? AND position IN ({marks})", (info.id, *shown_at)
                ):
                    found[(owner_at(here, m.position).id, m.position)] = m.data
            found |= await self._parked_at(db, info.id, wanted - set(found))
            counts = await self._parked_counts(db, info.id)
        out: list[ChatBranch] = []
        for b in _tree_order(branches):
            length = counts.get(b.id, 0)
            if b.id in spans:
                first, stop = spans[b.id]
                length += (info.message_count if stop is None else stop) - first
            forks = {
                c.fork: found[(b.id, c.fork)]
                for c in branches.values()
                if c.parent == b.id and (b.id, c.fork) in found
            }
            out.append(
                ChatBranch(
                    b.id,
                    b.parent,
                    b.fork,
                    length,
                    found.get((b.id, b.fork)),
                    b.id in on_path,
                    forks,
                )
            )
        return ChatTree(info=info, current=current, branches=out)

    @staticmethod
    async def _parked_at(
        db: SqliteConnection, chat_id: str, wanted: set[tuple[str, int]]
    ) -> dict[tuple[str, int], dict[str, Any]]:
        """The parked messages at ``wanted`` (branch, position) pairs that exist."""
        out: dict[tuple[str, int], dict[str, Any]] = {}
        pairs = sorted(wanted)
        for start in range(0, len(pairs), 200):  # SQLite's bound-parameter limit
            chunk = pairs[start : start + 200]
            where = " OR ".join("(branch_id = ? AND position = ?)" for _ in chunk)
            for r in await db.execute_fetchall(
                f"SELECT branch_id, position, data FROM branch_messages WHERE chat_id = ? "
                f"AND ({where})",
                (chat_id, *(v for pair in chunk for v in pair)),
            ):
                out[(r[0], int(r[1]))] = json.loads(r[2])
        return out

    async def load_parked(
        self, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> dict[str, list[StoredMessage]]:
        async with self._read() as db:
            row = await self._chat_row(db, ref, owner)
            rows = await db.execute_fetchall(
                "SELECT branch_id, message_id, position, data, partial FROM branch_messages "
                "WHERE chat_id = ? ORDER BY branch_id, position",
                (row[0],),
            )
        out: dict[str, list[StoredMessage]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(
                StoredMessage(
                    id=r[1], position=int(r[2]), data=json.loads(r[3]), partial_swipes=_marks(r[4])
                )
            )
        return out

    # -- changing the current path ---------------------------------------------------------
    async def fork_chat(self, ref: str, position: int, *, owner: str = DEFAULT_OWNER) -> str:
        async with self._write() as db:
            row = await self._chat_row(db, ref, owner)
            chat_id, total = row[0], int(row[5])
            if not 1 <= position < total:
                raise FormatError(
                    f"a branch starts at a message from 1 to {total - 1}, not {position}",
                    field="index",
                )
            branches, current = await self._branches(db, chat_id)
            if not branches:
                branches = {ROOT: BranchRow(ROOT, None, 0)}
                await self._add_branch(db, chat_id, branches[ROOT])
            here = chain(branches, current)
            await self._park(db, chat_id, here, position)
            new = BranchRow(self._new_id(), owner_at(here, position - 1).id, position)
            await self._add_branch(db, chat_id, new)
            await self._make_current(db, chat_id, new.id, left=branches[current], total=total)
            await self._touch(db, chat_id)
            return new.id

    async def switch_branch(self, ref: str, branch: str, *, owner: str = DEFAULT_OWNER) -> None:
        async with self._write() as db:
            row = await self._chat_row(db, ref, owner)
            chat_id, total = row[0], int(row[5])
            branches, current = await self._branches(db, chat_id)
            if branch not in branches and not (branch == ROOT and not branches):
                raise NotFound(f"no branch {branch!r} in chat {row[1]!r}")
            if branch == current:
                return
            here, there = chain(branches, current), chain(branches, branch)
            parted = divergence(here, there)
            assert parted is not None  # two branches: two paths
            await self._park(db, chat_id, here, parted)
            await self._unpark(db, chat_id, there, parted)
            await self._make_current(db, chat_id, branch, left=branches[current], total=total)
            await self._touch(db, chat_id)

    async def remove_messages(
        self, ref: str, position: int, count: int, *, owner: str = DEFAULT_OWNER
    ) -> int:
        async with self._write() as db:
            row = await self._chat_row(db, ref, owner)
            chat_id, total = row[0], int(row[5])
            end = min(position + count, total)
            if position < 0 or end <= position:
                return 0
            gone = end - position
            await db.execute(
                "DELETE FROM messages WHERE chat_id = ? AND position >= ? AND position < ?",
                (chat_id, position, end),
            )
            await self._move_up(db, "messages", "chat_id = ?", (chat_id,), end, gone)
            branches, current = await self._branches(db, chat_id)
            if branches:
                plan = squeeze(branches, current, position, gone)
                await self._replan(db, chat_id, branches, plan.forks, plan.shift, sign=-1)
                await self._drop_emptied(db, chat_id)
            await self._touch(db, chat_id)
            return gone

    async def insert_message(
        self,
        ref: str,
        position: int,
        message: Mapping[str, Any] | BaseModel,
        *,
        join: bool = False,
        owner: str = DEFAULT_OWNER,
    ) -> StoredMessage:
        doc = to_json_doc(message, source="<chat message>")
        async with self._write() as db:
            row = await self._chat_row(db, ref, owner)
            chat_id, total = row[0], int(row[5])
            if not 0 <= position <= total:
                raise FormatError(
                    f"a message is inserted at a position from 0 to {total}, not {position}",
                    field="index",
                )
            await self._move_up(db, "messages", "chat_id = ?", (chat_id,), position, -1)
            branches, current = await self._branches(db, chat_id)
            if branches:
                plan = spread(branches, current, position, join=join)
                await self._replan(db, chat_id, branches, plan.forks, plan.shift, sign=1)
            (mid,) = await self._insert_messages(db, chat_id, position, [doc])
            await self._touch(db, chat_id)
            return StoredMessage(id=mid, position=position, data=doc)

    async def cut_would_drop(
        self, ref: str, position: int, *, owner: str = DEFAULT_OWNER
    ) -> list[str]:
        async with self._read() as db:
            row = await self._chat_row(db, ref, owner)
            branches, current = await self._branches(db, row[0])
            if not branches:
                return []
            cut = cut_at(branches, current, position)
            counts = await self._parked_counts(db, row[0])
        return sorted(b for b in cut.unpark if counts.get(b))

    @staticmethod
    async def _move_up(
        db: SqliteConnection,
        table: str,
        where: str,
        params: tuple[Any, ...],
        start: int,
        by: int,
    ) -> None:
        """Move the rows of ``table`` at ``start`` and after up by ``by`` positions (down for
        a negative ``by``), in two steps, so no intermediate state breaks the (…, position)
        key."""
        if by == 0:
            return
        await db.execute(
            f"UPDATE {table} SET position = -position - 1 WHERE {where} AND position >= ?",
            (*params, start),
        )
        await db.execute(
            f"UPDATE {table} SET position = -position - 1 - ? WHERE {where} AND position < 0",
            (by, *params),
        )

    async def _replan(
        self,
        db: SqliteConnection,
        chat_id: str,
        branches: Branches,
        forks: Mapping[str, int],
        shift: Mapping[str, int],
        *,
        sign: int,
    ) -> None:
        """Move each branch's parked rows by ``sign * shift[branch]`` positions (up for
        ``-1``, down for ``1``) and set the forks that changed."""
        for branch, by in sorted(shift.items()):
            await self._move_up(
                db,
                "branch_messages",
                "chat_id = ? AND branch_id = ?",
                (chat_id, branch),
                0,
                -sign * by,
            )
        for branch, fork in sorted(forks.items()):
            if fork != branches[branch].fork:
                await db.execute(
                    "UPDATE chat_branches SET fork = ? WHERE chat_id = ? AND id = ?",
                    (fork, chat_id, branch),
                )

    async def _drop_emptied(self, db: SqliteConnection, chat_id: str) -> None:
        """Remove the members of the current chain a deletion left owning no message (an
        empty node the path only passes through): their children continue their parent."""
        branches, current = await self._branches(db, chat_id)
        counts = await self._parked_counts(db, chat_id)
        gone: set[str] = set()
        for branch in emptied(branches, current, counts):
            gone.add(branch)
            parent = branches[branch].parent
            while parent in gone:  # two empty nodes in a row: continue the first's parent
                parent = branches[parent].parent
            await db.execute(
                "UPDATE chat_branches SET parent = ? WHERE chat_id = ? AND parent = ?",
                (parent, chat_id, branch),
            )
            await db.execute(
                "DELETE FROM chat_branches WHERE chat_id = ? AND id = ?", (chat_id, branch)
            )

    @staticmethod
    async def _parked_counts(db: SqliteConnection, chat_id: str) -> dict[str, int]:
        return {
            r[0]: int(r[1])
            for r in await db.execute_fetchall(
                "SELECT branch_id, count(*) FROM branch_messages WHERE chat_id = ? "
                "GROUP BY branch_id",
                (chat_id,),
            )
        }

    async def _cut_tree(self, db: SqliteConnection, chat_id: str, position: int) -> None:
        branches, current = await self._branches(db, chat_id)
        if not branches:
            return
        cut = cut_at(branches, current, position)
        for branch in sorted(cut.unpark):
            await db.execute(
                "DELETE FROM branch_messages WHERE chat_id = ? AND branch_id = ?",
                (chat_id, branch),
            )
        for branch in sorted(cut.drop):
            await db.execute(
                "DELETE FROM chat_branches WHERE chat_id = ? AND id = ?", (chat_id, branch)
            )
        if cut.current != current:
            await self._set_current(db, chat_id, cut.current)
        if set(branches) - cut.drop == {ROOT}:
            # one branch left, holding every message: the chat has not branched
            await db.execute("DELETE FROM chat_branches WHERE chat_id = ?", (chat_id,))

    # -- rows ------------------------------------------------------------------------------
    async def _add_branch(self, db: SqliteConnection, chat_id: str, row: BranchRow) -> None:
        await db.execute(
            "INSERT INTO chat_branches (chat_id, id, parent, fork, current, created) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (chat_id, row.id, row.parent, row.fork, int(row.id == ROOT), self._now()),
        )

    async def _make_current(
        self, db: SqliteConnection, chat_id: str, branch: str, *, left: BranchRow, total: int
    ) -> None:
        """Make ``branch`` current; the branch ``left`` goes when it held no message (an
        empty branch a cut left, or a fork that never got its first message)."""
        await self._set_current(db, chat_id, branch)
        if left.id != ROOT and left.fork >= total:
            await db.execute(
                "DELETE FROM chat_branches WHERE chat_id = ? AND id = ?", (chat_id, left.id)
            )

    @staticmethod
    async def _set_current(db: SqliteConnection, chat_id: str, branch: str) -> None:
        await db.execute(
            "UPDATE chat_branches SET current = CASE WHEN id = ? THEN 1 ELSE 0 END "
            "WHERE chat_id = ?",
            (branch, chat_id),
        )

    async def _park(
        self, db: SqliteConnection, chat_id: str, here: Sequence[BranchRow], start: int
    ) -> None:
        """Move the current path's messages from ``start`` on to ``branch_messages``, each
        under the branch of chain ``here`` that owns its position."""
        moving = await self._message_rows(
            db, "WHERE chat_id = ? AND position >= ? ORDER BY position", (chat_id, start)
        )
        if not moving:
            return
        await db.executemany(
            "INSERT INTO branch_messages (chat_id, branch_id, position, message_id, data, "
            "partial) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    chat_id,
                    owner_at(here, m.position).id,
                    m.position,
                    m.id,
                    dumps(m.data),
                    ",".join(str(i) for i in m.partial_swipes),
                )
                for m in moving
            ],
        )
        await db.execute(
            "DELETE FROM messages WHERE chat_id = ? AND position >= ?", (chat_id, start)
        )

    async def _unpark(
        self, db: SqliteConnection, chat_id: str, there: Sequence[BranchRow], start: int
    ) -> None:
        """Move the parked messages of chain ``there``'s path from ``start`` on back onto
        the current path, with their ids."""
        for branch, first, stop in segments(there, start):
            bound = "" if stop is None else " AND position < ?"
            params: tuple[Any, ...] = (chat_id, branch, first)
            if stop is not None:
                params = (*params, stop)
            rows = list(
                await db.execute_fetchall(
                    "SELECT message_id, position, data, partial FROM branch_messages "
                    f"WHERE chat_id = ? AND branch_id = ? AND position >= ?{bound} "
                    "ORDER BY position",
                    params,
                )
            )
            if not rows:
                continue
            splits = []
            for r in rows:
                split = split_message(json.loads(r[2]))
                splits.append(_marked_partial(split, _marks(r[3])))
            await db.executemany(
                "INSERT INTO messages (id, chat_id, position, body, extracted, mes, flags) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (r[0], chat_id, int(r[1]), s.body_json, s.extracted_text, s.mes, s.flags)
                    for r, s in zip(rows, splits, strict=True)
                ],
            )
            await self._insert_swipes(db, [(r[0], s) for r, s in zip(rows, splits, strict=True)])
            await db.execute(
                "DELETE FROM branch_messages WHERE chat_id = ? AND branch_id = ? "
                f"AND position >= ?{bound}",
                params,
            )


def _within(position: int, first: int, stop: int | None, info: ChatInfo) -> bool:
    end = info.message_count if stop is None else stop
    return first <= position < end


def _marks(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",") if i)


def _tree_order(branches: Branches) -> list[BranchRow]:
    """Root first, then each branch before its children, siblings by fork then id."""
    children: dict[str | None, list[BranchRow]] = {}
    for row in branches.values():
        children.setdefault(row.parent, []).append(row)
    out: list[BranchRow] = []
    stack = sorted(children.get(None, []), key=lambda r: (r.fork, r.id), reverse=True)
    while stack:
        row = stack.pop()
        out.append(row)
        stack.extend(sorted(children.get(row.id, []), key=lambda r: (r.fork, r.id), reverse=True))
    return out
