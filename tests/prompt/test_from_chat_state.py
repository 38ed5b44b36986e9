"""The store-backed pipeline: ChatState -> PromptState -> world info -> built prompt.

End to end on a real SQLite store: the demo card imported through the library, and two
recorded SillyTavern generations (one chat, one text completion) loaded into a store record by
record, which must build exactly what SillyTavern sent.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from tavernkit.facade import Tavern
from tavernkit.models.character import Card
from tavernkit.models.chat import ChatHeader, ChatMetadata, Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.persona import Persona
from tavernkit.models.preset import ChatCompletionPreset, migrate_legacy_preset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings, settings_from_st
from tavernkit.models.state import ChatState
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    SystemPrompt,
    migrate_legacy_instruct,
)
from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.from_chat_state import main_api_of, prompt_state_from_chat_state
from tavernkit.prompt.pipeline import PromptTarget, prepare
from tavernkit.store.chat_state import load_chat_state
from tavernkit.text.tokens import ByteEstimateTokenizer

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "src" / "tavernkit" / "data" / "wren.json"


def conformance_root() -> Path:
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance"


async def _demo_state(tmp_path: Path, *, settings: Settings | None = None) -> ChatState:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_file(DEMO)
        store = tk.store
        settings = settings or Settings()
        settings.selections.character = "Wren"
        settings.selections.persona = "Ada"
        await store.put("persona", Persona(name="Ada", description="A cartographer."), name="Ada")
        await store.put_settings(settings)
        await store.set_global_variable("weather", "stormy")
        header = ChatHeader.new(
            ChatMetadata.model_validate(
                {
                    "variables": {"mood": "wary"},
                    "note_prompt": "Keep {{char}} terse. Mood: {{getvar::mood}}.",
                    "note_depth": 1,
                }
            )
        )
        messages = [
            Message.new("Wren", "Tide caught you, did it?", is_user=False),
            Message.new("Ada", "It did. Does the lamp ever go out?", is_user=True),
        ]
        info = await store.create_chat(header, messages, name="night", character="Wren")
        return await load_chat_state(store, chat_id=info.id)


async def test_demo_card_chat_completion_end_to_end(tmp_path: Path) -> None:
    state = await _demo_state(tmp_path)
    assert main_api_of(state) == "openai"
    result = prepare(state, PromptTarget(tokenizer=ByteEstimateTokenizer()), rng=lambda: 0.0).prompt
    assert isinstance(result, AssembledChat)
    messages = result.messages
    text = "\n".join(str(m["content"]) for m in messages)
    # The card, the persona and the chat, with names filled in by the macro engine.
    assert messages[0] == {
        "role": "system",
        "content": "Write Wren's next reply in a fictional chat between Wren and Ada.",
    }
    assert "Wren is the last keeper of the Saltmarrow lighthouse" in text
    assert "A cartographer." in text
    assert messages[-1] == {"role": "user", "content": "It did. Does the lamp ever go out?"}
    # "lamp" triggers the linked lorebook's entry; the Author's Note goes in at depth 1 with
    # the chat variable expanded.
    assert result.activated_entries, "the Saltmarrow lorebook should fire on 'lamp'"
    assert any(e.startswith("Saltmarrow.") for e in result.activated_entries)
    assert {"role": "system", "content": "Keep Wren terse. Mood: wary."} in messages
    assert messages.index({"role": "system", "content": "Keep Wren terse. Mood: wary."}) == (
        len(messages) - 2
    )


async def test_build_does_not_change_the_state_variables(tmp_path: Path) -> None:
    state = await _demo_state(tmp_path)
    assert state.chat is not None
    state.chat.metadata.note_prompt = "{{setvar::mood::calm}}{{getglobalvar::weather}}"
    result = prepare(state, PromptTarget(tokenizer=ByteEstimateTokenizer()), rng=lambda: 0.0).prompt
    assert isinstance(result, AssembledChat)
    assert {"role": "system", "content": "stormy"} in result.messages
    assert state.chat.metadata.variables == {"mood": "wary"}


async def test_text_completion_by_profile(tmp_path: Path) -> None:
    settings = Settings()
    settings.prompt.max_context = 2048
    settings.prompt.amount_gen = 100
    state = await _demo_state(tmp_path, settings=settings)
    state = state.model_copy(
        update={"profile": ConnectionProfile(name="local", api="text", model="llama")}
    )
    prompt_state = prompt_state_from_chat_state(state)
    assert prompt_state.settings.main_api == "textgenerationwebui"
    assert (prompt_state.max_context, prompt_state.max_response) == (2048, 100)
    assert prompt_state.user == "Ada" and prompt_state.char == "Wren"
    result = prepare(state, rng=lambda: 0.0).prompt
    assert isinstance(result, AssembledText)
    assert result.prompt.endswith("Ada: It did. Does the lamp ever go out?\nWren:")
    assert "\nAda:" in result.stop


async def test_prompt_state_mapping_of_every_field(tmp_path: Path) -> None:
    settings = Settings()
    settings.prompt.instruct_enabled = True
    settings.prompt.sysprompt_enabled = False
    settings.reasoning.add_to_prompts = True
    state = await _demo_state(tmp_path, settings=settings)
    preset = ChatCompletionPreset.model_validate(
        {"chat_completion_source": "claude", "claude_model": "claude-x"}
    )
    state = state.model_copy(
        update={
            "chat_preset": preset,
            "instruct": InstructTemplate(name="ChatML"),
            "sysprompt": SystemPrompt(name="S", content="sys"),
        }
    )
    ps = prompt_state_from_chat_state(state)
    assert ps.character.name == "Wren"
    assert ps.persona is not None and ps.persona.name == "Ada"
    assert ps.preset is preset and ps.model == "claude-x" and ps.source == "claude"
    assert ps.instruct_enabled and not ps.sysprompt_enabled
    assert ps.sysprompt is not None and ps.sysprompt.content == "sys"
    assert ps.reasoning is not None and ps.reasoning.add_to_prompts
    assert ps.note.prompt.startswith("Keep {{char}} terse") and ps.note.depth == 1
    assert [m.mes for m in ps.messages] == [m.mes for m in state.messages]
    assert ps.api == "openai" and ps.max_context is None
    assert prompt_state_from_chat_state(state, model="m2").model == "m2"


# --- recorded SillyTavern generations, through a store ----------------------------------------


def _case(name: str) -> dict[str, Any]:
    path = conformance_root() / "st-1.18" / "prompts" / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"prompt case {path} not found")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


async def _store_case(tk: Tavern, case: dict[str, Any]) -> ChatState:
    """Put one case's inputs into the store as separate records, then load the turn."""
    store = tk.store
    inputs, live = case["inputs"], case["effective_settings"]
    settings_in = inputs.get("settings") or {}
    card = inputs["card"]
    await store.put(
        "character",
        Card.model_validate({"spec": "chara_card_v2", "spec_version": "2.0", "data": card["data"]}),
        name=card["name"],
    )
    for book in [*(inputs.get("books") or []), inputs.get("character_world_book")]:
        if book and book.get("data"):
            await store.put("lorebook", Lorebook.model_validate(book["data"]), name=book["name"])
    persona = Persona.model_validate(inputs["persona"])
    await store.put("persona", persona, name=persona.name)

    st_settings: dict[str, Any] = {
        "power_user": live.get("power_user") or {},
        "world_info_settings": {**(live.get("world_info") or {}), **inputs.get("wi_settings", {})},
        "main_api": settings_in["main_api"],
        "max_context": settings_in["max_context"],
        "amount_gen": settings_in["amount_gen"],
    }
    settings = settings_from_st(st_settings)
    settings.selections.character = card["name"]
    settings.selections.persona = persona.name
    settings.compat = "st-1.18"
    if inputs.get("preset"):
        preset = ChatCompletionPreset.model_validate(migrate_legacy_preset(inputs["preset"]))
        await store.put("chat_preset", preset, name="case preset")
        settings.selections.chat_preset = "case preset"
    for kind, model, key, setting in (
        ("instruct", InstructTemplate, "instruct", "instruct_template"),
        ("context", ContextTemplate, "context", "context_template"),
        ("sysprompt", SystemPrompt, "sysprompt", "sysprompt"),
    ):
        raw = inputs.get(key)
        if raw:
            raw = migrate_legacy_instruct(dict(raw)) if kind == "instruct" else raw
            name = f"case {kind}"
            await store.put(kind, model.model_validate(raw), name=name)
            setattr(settings.prompt, setting, name)
    await store.put_settings(settings)

    metadata = {
        **(live.get("chat_metadata") or {}),
        **(inputs.get("author_note_chat_metadata") or {}),
    }
    header = ChatHeader.new(
        ChatMetadata.model_validate({k: v for k, v in metadata.items() if v is not None})
    )
    messages = [Message.model_validate(m) for m in inputs["chat"]]
    info = await store.create_chat(header, messages, name="case", character=card["name"])
    return await load_chat_state(store, chat_id=info.id)


@pytest.mark.parametrize("name", ["cc_seraphina", "tc_seraphina_default", "cc_persona"])
async def test_store_built_state_matches_sillytavern(name: str, tmp_path: Path) -> None:
    case = _case(name)
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        state = await _store_case(tk, case)
    model = case["inputs"]["settings"].get("cc_custom_model")
    generate = case["inputs"].get("generate") or {}
    result = prepare(
        state,
        PromptTarget(model=model),
        str(generate.get("type") or "normal"),
        rng=random.Random(0).random,
    ).prompt
    body = case["request_body"]
    if case["api"] == "cc":
        assert isinstance(result, AssembledChat)
        assert result.messages == body["messages"]
    else:
        assert isinstance(result, AssembledText)
        assert result.prompt == body["prompt"]
        assert result.stop == body.get("stop", body.get("stopping_strings"))
