"""How ``tavernkit show`` prints each kind of record (rich tables and panels)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.facade import Tavern
from tavernkit.library import Found

__all__ = ["render_found"]

_PREVIEW = 300


def _short(text: Any, limit: int = _PREVIEW) -> str:
    value = "" if text is None else str(text)
    value = value.strip()
    return escape(value if len(value) <= limit else value[: limit - 1] + "…")


def _fields(console: Console, title: str, rows: list[tuple[str, Any]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left", expand=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        if value not in (None, "", [], {}):
            table.add_row(label, value if isinstance(value, str) else escape(str(value)))
    console.print(table)


async def render_found(tk: Tavern, found: Found, console: Console) -> None:
    if found.kind == "chat":
        await _render_chat(tk, found, console)
        return
    data = (await tk.store.get_record(found.kind, found.id, owner=tk.owner)).data
    if found.kind == "character":
        await _render_character(tk, found, data, console)
    elif found.kind == "lorebook":
        _render_lorebook(found, data, console)
    else:
        rows = [("kind", found.kind), ("id", found.id)]
        for key, value in data.items():
            if isinstance(value, str | int | float | bool) and value != "":
                rows.append((key, _short(value, 160)))
        extra = [k for k, v in data.items() if isinstance(v, list | dict)]
        if extra:
            rows.append(("also", ", ".join(extra)))
        _fields(console, found.name, rows)


async def _render_character(
    tk: Tavern, found: Found, card: dict[str, Any], console: Console
) -> None:
    data = card.get("data") or {}
    avatar = await tk.store.get_blob("character", found.id, "avatar", owner=tk.owner)
    books = await tk.store.links("character", found.id, "lorebook", owner=tk.owner)
    extensions = data.get("extensions") or {}
    rows: list[tuple[str, Any]] = [
        ("spec", f"{card.get('spec', 'v1')} {card.get('spec_version', '')}".strip()),
        ("creator", _short(data.get("creator"))),
        ("version", _short(data.get("character_version"))),
        ("tags", escape(", ".join(str(t) for t in data.get("tags") or []))),
        ("description", _short(data.get("description"))),
        ("personality", _short(data.get("personality"))),
        ("scenario", _short(data.get("scenario"))),
        ("first message", _short(data.get("first_mes"))),
        ("greetings", f"{1 + len(data.get('alternate_greetings') or [])} (first + alternates)"),
        ("system prompt", _short(data.get("system_prompt"))),
        ("post-history", _short(data.get("post_history_instructions"))),
        (
            "lorebook",
            escape(", ".join(b.name for b in books) or str(extensions.get("world") or "")),
        ),
        ("avatar", f"{len(avatar)} bytes" if avatar else "none"),
        ("id", found.id),
    ]
    _fields(console, data.get("name") or found.name, rows)


def _render_lorebook(found: Found, book: dict[str, Any], console: Console) -> None:
    entries = book.get("entries") or {}
    table = Table(title=f"{found.name} — {len(entries)} entries", title_justify="left")
    for column in ("uid", "keys", "comment", "position", "order", "flags"):
        table.add_column(column, overflow="fold")
    for uid, entry in entries.items():
        flags = [
            name
            for name, on in (
                ("constant", entry.get("constant")),
                ("disabled", entry.get("disable")),
                ("selective", entry.get("selective") and entry.get("keysecondary")),
            )
            if on
        ]
        table.add_row(
            escape(str(entry.get("uid", uid))),
            _short(", ".join(str(k) for k in entry.get("key") or []), 80),
            _short(entry.get("comment"), 60),
            str(entry.get("position", 0)),
            str(entry.get("order", 100)),
            ", ".join(flags),
        )
    console.print(table)


async def _render_chat(tk: Tavern, found: Found, console: Console) -> None:
    stored = await tk.store.load_chat(found.id, owner=tk.owner)
    info = stored.info
    console.print(
        f"[bold]{escape(info.name)}[/] [dim]{escape(info.character_name or '-')}, "
        f"{info.message_count} messages[/]"
    )
    for message in stored.messages[-10:]:
        data = message.data
        who = escape(str(data.get("name") or ("You" if data.get("is_user") else "?")))
        style = "green" if data.get("is_user") else "magenta"
        console.print(f"[{style}]{who}:[/] {_short(data.get('mes'), 400)}")
