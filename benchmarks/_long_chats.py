"""A home with two characters' chats, "Short" (200 messages) and "Long" (``messages``), each
character with the same ``entries``-entry lorebook, made through the CLI as a user would
import them: what ``message_change.py`` and ``script_run.py`` compare."""

from __future__ import annotations

from pathlib import Path

from cli_chat import tk, write_inputs  # type: ignore[import-not-found]

__all__ = ["SHORT", "short_and_long"]

#: the short chat's length
SHORT = 200


def _import_chat(home: Path, folder: Path, messages: int, entries: int, name: str) -> None:
    paths = write_inputs(folder, messages, entries)
    card = folder / f"{name}.json"
    card.write_text(paths["card"].read_text("utf-8").replace('"Mira"', f'"{name}"'), "utf-8")
    chat = folder / f"{name} - long.jsonl"
    chat.write_text(paths["chat"].read_text("utf-8").replace('"Mira"', f'"{name}"'), "utf-8")
    tk(home, "import", str(card), str(paths["book"]))
    tk(home, "import", str(chat), "-c", name)
    tk(home, "character", "lorebook", name, "Harbour")


def short_and_long(tmp: Path, messages: int, entries: int) -> Path:
    """The home (under ``tmp``) with the characters "Short" and "Long" and their chats."""
    home = tmp / "home"
    for name, size in (("Short", SHORT), ("Long", messages)):
        folder = tmp / name
        folder.mkdir()
        _import_chat(home, folder, size, entries, name)
    return home
