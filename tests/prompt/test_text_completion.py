"""Text-completion assembly: plain and instruct prompts, trimming, stop strings."""

from __future__ import annotations

from typing import Any

from tavernkit.models.character import Character
from tavernkit.models.chat import Message
from tavernkit.models.settings import PromptSettings
from tavernkit.models.templates import ContextTemplate, InstructTemplate, SystemPrompt
from tavernkit.prompt import PromptState, build_text_completion
from tavernkit.prompt.state import names_only_substitute

STORY = (
    "{{#if system}}{{system}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{trim}}"
)


def state(**changes: Any) -> PromptState:
    base = PromptState(
        character=Character(
            name="Aria",
            description="{{char}} sings.",
            scenario="",
            mes_example="<START>\n{{user}}: Sing!\n{{char}}: La la.",
        ),
        messages=[
            Message.new("Aria", "Hello.", is_user=False),
            Message.new("User", "Hi Aria.", is_user=True),
        ],
        context=ContextTemplate(story_string=STORY, chat_start="***", example_separator="***"),
        sysprompt=SystemPrompt(content="Play {{char}}."),
        settings=PromptSettings(max_context=4096, amount_gen=200),
    )
    return base.replace(**changes)


def build(s: PromptState, **kw: Any) -> Any:
    return build_text_completion(s, substitute=names_only_substitute(s.user, s.char), **kw)


def test_plain_prompt_and_stop_strings() -> None:
    result = build(state())
    assert result.prompt == (
        "Play Aria.\nAria sings.\n***\nUser: Sing!\nAria: La la.\n***\n"
        "Aria: Hello.\nUser: Hi Aria.\nAria:"
    )
    assert result.stop == ["\nUser:", "\n***"]  # the context's separators stop too


def test_impersonate_and_continue_lines() -> None:
    impersonated = build(state(), kind="impersonate")
    assert impersonated.prompt.endswith("User: Hi Aria.\nUser:")
    # SillyTavern 1.18 stops an impersonation at both participants' prefixes, the
    # character's first (the order of its grp_tc_impersonate request)
    assert impersonated.stop == ["\nAria:", "\nUser:", "\n***"]
    messages = [
        Message.new("User", "Hi Aria.", is_user=True),
        Message.new("Aria", "Well, I", is_user=False),
    ]
    continued = build(state(messages=messages), kind="continue")
    assert continued.prompt.endswith("User: Hi Aria.\nAria: Well, I")


def test_impersonate_stop_strings_names_then_instruct_sequences() -> None:
    chatml = InstructTemplate(
        input_sequence="<|im_start|>user",
        output_sequence="<|im_start|>assistant",
        system_sequence="<|im_start|>system",
        stop_sequence="<|im_end|>",
        input_suffix="<|im_end|>\n",
        output_suffix="<|im_end|>\n",
        system_suffix="<|im_end|>\n",
        sequences_as_stop_strings=True,
    )
    s = state(
        instruct=chatml,
        instruct_enabled=True,
        context=ContextTemplate(story_string=STORY, chat_start="", example_separator=""),
    )
    sequences = [
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]
    assert build(s, kind="impersonate").stop == ["\nAria:", "\nUser:", *sequences]
    assert build(s).stop == ["\nUser:", *sequences]  # a normal turn: the user's prefix only


def test_instruct_prompt_with_sequences() -> None:
    instruct = InstructTemplate(
        input_sequence="### Instruction:",
        output_sequence="### Response:",
        system_sequence="### Input:",
        input_suffix="\n\n",
        output_suffix="\n\n",
        system_suffix="\n\n",
        story_string_suffix="\n\n",
    )
    result = build(
        state(
            instruct=instruct,
            instruct_enabled=True,
            context=ContextTemplate(story_string=STORY, chat_start="", example_separator=""),
        )
    )
    assert result.prompt == (
        "Play Aria.\nAria sings.\n\n"
        "### Instruction:\nUser: Sing!\n\n### Response:\nLa la.\n\n"
        "### Response:\nHello.\n\n### Instruction:\nHi Aria.\n\n### Response:\n"
    )
    assert result.stop == ["\nUser:", "\n### Instruction:", "\n### Response:", "\n### Input:"]


def test_small_context_drops_examples_then_old_messages() -> None:
    long = [
        Message.new("User" if i % 2 else "Aria", f"message {i} " * 8, is_user=bool(i % 2))
        for i in range(30)
    ]
    small = state(messages=long, settings=PromptSettings(max_context=400, amount_gen=100))
    result = build(small)
    assert "message 29" in result.prompt
    assert "message 0 " not in result.prompt
    kept = [i for i in range(30) if f"message {i} " in result.prompt]
    assert kept == list(range(kept[0], 30))  # newest first, stopped at the first misfit
    assert result.token_count <= 300 + 64


def test_post_history_instructions_go_last() -> None:
    sysprompt = SystemPrompt(content="Play {{char}}.", post_history="Stay in character.")
    result = build(state(sysprompt=sysprompt))
    assert result.prompt.endswith("User: Hi Aria.\nUser: Stay in character.\nAria:")
