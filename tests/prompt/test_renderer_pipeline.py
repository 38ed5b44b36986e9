"""A provider registered on ``Tavern.prompt_renderer`` works inside a whole prompt build."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tavernkit.facade import Tavern
from tavernkit.models.chat import ChatHeader, Message
from tavernkit.models.settings import Settings
from tavernkit.prompt.assembled import AssembledChat
from tavernkit.prompt.pipeline import prepare
from tavernkit.store.chat_state import load_chat_state

DEMO = Path(__file__).resolve().parents[2] / "src" / "tavernkit" / "data" / "wren.json"


async def test_registered_function_and_variable_reach_the_prompt(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_file(DEMO)
        settings = Settings()
        settings.selections.character = "Wren"
        await tk.store.put_settings(settings)
        user = Message.new(
            "User", "What is the weather? {{weather::Saltmarrow}} {{mood}}", is_user=True
        )
        info = await tk.store.create_chat(ChatHeader.new(), [user], name="t", character="Wren")
        state = await load_chat_state(tk.store, chat_id=info.id)

        calls: list[Any] = []

        def weather(args: list[str], variables: Any, configurable: Any) -> str:
            calls.append(args)
            return f"fog over {args[0]}"

        tk.prompt_renderer.register_function_provider("weather", weather)
        tk.prompt_renderer.set_variable("mood", "calm")
        prompt = prepare(state, renderer=tk.prompt_renderer).prompt
        plain = prepare(state).prompt

    assert isinstance(prompt, AssembledChat) and isinstance(plain, AssembledChat)
    text = "\n".join(str(m["content"]) for m in prompt.messages)
    assert "fog over Saltmarrow calm" in text
    assert calls and calls[0][0] == "Saltmarrow"
    # Without the renderer the unknown macros stay as written, as SillyTavern leaves them.
    plain_text = "\n".join(str(m["content"]) for m in plain.messages)
    assert "{{weather::Saltmarrow}}" in plain_text
    # The card fields are still the engine's: the description mentions the lighthouse.
    assert "Saltmarrow lighthouse" in text
