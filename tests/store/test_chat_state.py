"""load_chat_state gathers one turn's inputs from the store, SillyTavern's book rules included."""

from __future__ import annotations

from pathlib import Path

from tavernkit.facade import Tavern
from tavernkit.models.chat import ChatHeader, ChatMetadata, Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.persona import Persona
from tavernkit.models.settings import CharLore, Settings
from tavernkit.store.chat_state import load_chat_state

DEMO = Path(__file__).resolve().parents[2] / "src" / "tavernkit" / "data" / "wren.json"


def _book(uid_key: str) -> Lorebook:
    book = Lorebook()
    book.new_entry(keys=[uid_key], content=f"about {uid_key}")
    return book


async def test_state_collects_books_once_by_scope(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_file(DEMO)
        store = tk.store
        for name in ("Global", "ChatBook", "PersonaBook", "Extra"):
            await store.put("lorebook", _book(name.lower()), name=name)
        await store.put("persona", Persona(name="Ada", lorebook="PersonaBook"), name="Ada")
        settings = Settings()
        settings.world_info.global_books = ["Global", "Saltmarrow"]
        settings.world_info.char_lore = [CharLore(name="Wren", extra_books=["Extra"])]
        settings.selections.character = "Wren"
        settings.selections.persona = "Ada"
        await store.put_settings(settings)
        header = ChatHeader.new(ChatMetadata.model_validate({"world_info": "ChatBook"}))
        first = Message.new("Wren", "Tide caught you?", is_user=False)
        info = await store.create_chat(header, [first], name="night", character="Wren")

        state = await load_chat_state(store, chat_id=info.id)

    assert state.character is not None and state.character.name == "Wren"
    assert state.user_name == "Ada"
    # Saltmarrow is global, so it is not scanned again as the character's book.
    assert [(b.name, b.scope) for b in state.books] == [
        ("Global", "global"),
        ("Saltmarrow", "global"),
        ("Extra", "character_extra"),
        ("ChatBook", "chat"),
        ("PersonaBook", "persona"),
    ]
    assert [m.mes for m in state.messages] == ["Tide caught you?"]
    assert state.chat_id == info.id


async def test_state_without_chat_uses_selections_and_ignores_missing(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_file(DEMO)
        settings = Settings()
        settings.selections.character = "Wren"
        settings.selections.chat_preset = "Nope"  # deleted since: the turn runs without it
        await tk.store.put_settings(settings)
        state = await load_chat_state(tk.store)
    assert state.character is not None and state.character.name == "Wren"
    assert state.chat is None and state.chat_preset is None
    assert [(b.name, b.scope) for b in state.books] == [("Saltmarrow", "character")]
