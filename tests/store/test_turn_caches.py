"""What a turn keeps across turns: lorebooks compiled once per revision, from the stored JSON."""

from __future__ import annotations

import random
from dataclasses import fields

import pytest

from tavernkit.models.lorebook import Lorebook
from tavernkit.models.settings import Settings
from tavernkit.store import SqliteStore
from tavernkit.store.chat_state import load_chat_state
from tavernkit.worldinfo import book_cache
from tavernkit.worldinfo import compile as wi_compile
from tavernkit.worldinfo.index import default_engine


def _book(n: int, word: str = "bell") -> dict[str, object]:
    rng = random.Random(n)
    return {
        "entries": {
            str(uid): {
                "uid": uid,
                "key": [f"{word}{uid}", "@@odd"],
                "keysecondary": [],
                "content": f"@@activate\nEntry {uid} {rng.random()}",
                "order": uid % 7,
                "probability": 50,
                "useProbability": True,
                "characterFilter": {"isExclude": False, "names": ["Mira"], "tags": []},
                "extensions": {"nested": [1, {"deep": None}]},
            }
            for uid in range(n)
        }
    }


def _entry_values(book: wi_compile.CompiledBook) -> list[tuple[object, ...]]:
    names = [f.name for f in fields(wi_compile.CompiledEntry) if f.name != "_hash"]
    return [tuple(getattr(e, n) for n in names) for e in book.entries]


async def _state_books(store: SqliteStore) -> list[Lorebook]:
    state = await load_chat_state(store)
    return [b.book for b in state.books]


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the books compiled (a spy around the real compiler)."""
    seen: list[str] = []
    real = book_cache.compile_entries

    def spy(name: str, *args: object, **kwargs: object) -> wi_compile.CompiledBook:
        seen.append(name)
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(book_cache, "compile_entries", spy)
    default_engine().books.clear()
    return seen


async def test_a_stored_book_compiles_as_its_model_does(
    store: SqliteStore, compiles: list[str]
) -> None:
    await store.put("lorebook", _book(30), name="Coast")
    settings = Settings()
    settings.world_info.global_books = ["Coast"]
    await store.put_settings(settings)
    (model,) = await _state_books(store)
    from_store = default_engine().books.get("Coast", model, compat=True)
    from_model = wi_compile.compile_book("Coast", Lorebook.model_validate(_book(30)))
    assert _entry_values(from_store) == _entry_values(from_model)
    assert [e.hash for e in from_store.entries] == [e.hash for e in from_model.entries]
    assert from_store.warnings == from_model.warnings


async def test_turns_compile_a_book_once_per_revision(
    store: SqliteStore, compiles: list[str]
) -> None:
    ref = await store.put("lorebook", _book(5), name="Coast")
    settings = Settings()
    settings.world_info.global_books = ["Coast"]
    await store.put_settings(settings)
    engine = default_engine().books
    for _ in range(3):
        (model,) = await _state_books(store)
        first = engine.get("Coast", model, compat=True)
    assert compiles == ["Coast"]
    await store.put("lorebook", _book(5, word="horn"), name="Coast", id=ref.id)
    (model,) = await _state_books(store)
    edited = engine.get("Coast", model, compat=True)
    assert compiles == ["Coast", "Coast"]
    assert edited is not first and edited.entries[0].keys[0] == "horn0"
