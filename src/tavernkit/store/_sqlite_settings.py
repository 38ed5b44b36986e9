"""An owner's settings document, global variables and storage use, in SQLite: the parts of
:class:`~tavernkit.store.sqlite.SqliteStore` kept per owner rather than per record (``settings``,
``global_variables``, ``storage_use``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from tavernkit.errors import FormatError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._message_rows import dumps
from tavernkit.store._sqlite_base import SqliteBase, to_json_doc
from tavernkit.store.record_types import JsonValue

__all__ = ["SqliteSettings"]


class SqliteSettings(SqliteBase):
    async def get_settings(self, *, owner: str = DEFAULT_OWNER) -> BaseModel | None:
        # every turn reads the settings: one statement, with no transaction around it
        async with self._read_now(snapshot=False) as db:
            rows = list(
                await db.execute_fetchall("SELECT data FROM settings WHERE owner = ?", (owner,))
            )
        if not rows:
            return None
        return self._validate("settings", json.loads(rows[0][0]), "<store settings>")

    async def put_settings(
        self, settings: Mapping[str, Any] | BaseModel, *, owner: str = DEFAULT_OWNER
    ) -> None:
        data = to_json_doc(settings, source="<settings>")
        if not isinstance(settings, BaseModel) and "settings" in self._models:
            self._validate("settings", data, "<settings>")
        async with self._write() as db:
            await db.execute(
                "INSERT INTO settings (owner, data, updated) VALUES (?, ?, ?) ON CONFLICT (owner)"
                " DO UPDATE SET data = excluded.data, updated = excluded.updated",
                (owner, dumps(data), self._now()),
            )

    async def get_global_variables(self, *, owner: str = DEFAULT_OWNER) -> dict[str, JsonValue]:
        async with self._read_now(snapshot=False) as db:  # one statement
            rows = await db.execute_fetchall(
                "SELECT name, value FROM global_variables WHERE owner = ? ORDER BY name", (owner,)
            )
        return {str(r[0]): json.loads(r[1]) for r in rows}

    async def set_global_variable(
        self, name: str, value: JsonValue, *, owner: str = DEFAULT_OWNER
    ) -> None:
        try:
            text = dumps(value)
        except (TypeError, ValueError) as exc:
            raise FormatError(
                f"not JSON-serialisable: {exc}", source="<global variable>", field=name
            ) from exc
        async with self._write() as db:
            await db.execute(
                "INSERT INTO global_variables (owner, name, value, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (owner, name) DO UPDATE SET value = excluded.value, "
                "updated = excluded.updated",
                (owner, name, text, self._now()),
            )

    async def delete_global_variable(self, name: str, *, owner: str = DEFAULT_OWNER) -> None:
        async with self._write() as db:
            await db.execute(
                "DELETE FROM global_variables WHERE owner = ? AND name = ?", (owner, name)
            )

    async def storage_used(self, *, owner: str = DEFAULT_OWNER) -> int:
        async with self._read_now() as db:
            rows = list(
                await db.execute_fetchall("SELECT bytes FROM storage_use WHERE owner = ?", (owner,))
            )
        return int(rows[0][0]) if rows else 0
