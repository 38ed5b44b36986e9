"""The task envelope and the preset edit API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import FormatError
from tavernkit.formats.presets import read_preset_file
from tavernkit.models.character import Character
from tavernkit.models.persona import Persona
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.prompt.envelope import build_task_envelope
from tavernkit.prompt.preset_edit import (
    PresetEditError,
    add_prompt,
    move_prompt,
    remove_prompt,
    set_enabled,
    set_injection,
)
from tavernkit.prompt.state import PromptState, names_only_substitute
from tavernkit.worldinfo.result import WorldInfoResult


class CharTokenizer:
    def count(self, text: str) -> int:
        return len(text)


def state() -> PromptState:
    return PromptState(
        character=Character(
            name="Aria",
            description="Aria sings.",
            personality="Kind.",
            mes_example="<START>\n{{user}}: Hi\n{{char}}: Hey",
            extensions={"depth_prompt": {"prompt": "Depth note.", "depth": 0, "role": "system"}},
        ),
        persona=Persona(name="User", description="A traveller."),
        preset=ChatCompletionPreset(),
    )


TASK = [
    {"role": "user", "content": "Summarize the scene."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "Found it."},
    {"role": "assistant", "content": "Done."},
]


def envelope(include: bool) -> list[dict[str, Any]]:
    wi = WorldInfoResult(before="WI before.")
    return build_task_envelope(
        state(),
        wi,
        TASK,
        include_character_card=include,
        tokenizer=CharTokenizer(),
        substitute=names_only_substitute("User", "Aria"),
    ).messages


def test_envelope_follows_the_preset_with_task_messages_as_history() -> None:
    messages = envelope(True)
    contents = [m.get("content") for m in messages]
    assert contents[:4] == [
        "Write Aria's next reply in a fictional chat between {{charIfNotGroup}} and User.",
        "WI before.",
        "A traveller.",
        "Aria sings.",
    ]
    assert contents[-1] == "Depth note."  # in-chat prompts still go in at their depth
    tail = messages[-5:-1]
    assert [m["role"] for m in tail] == ["user", "assistant", "tool", "assistant"]
    assert tail[1]["tool_calls"][0]["function"]["name"] == "lookup"
    assert tail[2] == {"role": "tool", "content": "Found it.", "tool_call_id": "c1"}


def test_envelope_without_the_card_keeps_persona_and_world_info() -> None:
    contents = [m.get("content") for m in envelope(False)]
    assert "WI before." in contents and "A traveller." in contents
    for dropped in ("Aria sings.", "Kind.", "Hey", "Depth note."):
        assert dropped not in contents


def test_envelope_rejects_bad_task_messages() -> None:
    with pytest.raises(FormatError):
        build_task_envelope(state(), None, [{"role": "robot", "content": "x"}])
    with pytest.raises(FormatError):
        build_task_envelope(state(), None, [{"role": "tool", "tool_call_id": "x", "content": ""}])


def _ids(preset: ChatCompletionPreset) -> list[tuple[str, bool]]:
    return [(o.identifier, o.enabled) for o in preset.active_order()]


def test_edit_api_round_trips_in_sillytavern_format(st_default_data: Path) -> None:
    preset = read_preset_file(st_default_data / "presets" / "openai" / "Default.json")
    assert isinstance(preset, ChatCompletionPreset)
    before = preset.to_wire()
    edited = set_enabled(preset, "enhanceDefinitions", True)
    assert ("enhanceDefinitions", True) in _ids(edited)
    assert preset.to_wire() == before  # the input is untouched
    edited = move_prompt(edited, "jailbreak", 0)
    assert _ids(edited)[0] == ("jailbreak", True)
    edited = add_prompt(edited, "style", name="Style", content="Be brief.", after="main")
    assert [i for i, _ in _ids(edited)][:2] == ["jailbreak", "main"]
    assert [i for i, _ in _ids(edited)][2] == "style"
    edited = set_injection(edited, "style", position="in_chat", depth=2, order=50, role="user")
    style = edited.prompt("style")
    assert style is not None
    assert (style.injection_position, style.injection_depth, style.injection_order) == (1, 2, 50)
    assert style.role == "user"
    again = ChatCompletionPreset.model_validate(edited.to_wire())
    assert again.to_wire() == edited.to_wire()
    removed = remove_prompt(edited, "style")
    assert removed.prompt("style") is None
    assert "style" not in [i for i, _ in _ids(removed)]
    with pytest.raises(PresetEditError):
        remove_prompt(removed, "main")
    with pytest.raises(PresetEditError):
        add_prompt(removed, "main", name="x", content="y")
    with pytest.raises(PresetEditError):
        set_injection(removed, "main", role="narrator")
