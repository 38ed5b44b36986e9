"""Reasoning: strict/lax parsing, the streaming parser, and adding reasoning back."""

from __future__ import annotations

from tavernkit.models.character import Character
from tavernkit.models.chat import Message, MessageExtra
from tavernkit.models.settings import ReasoningSettings
from tavernkit.models.templates import ReasoningTemplate
from tavernkit.prompt.reasoning import (
    ReasoningStreamParser,
    add_reasoning_to_messages,
    parse_reasoning,
)
from tavernkit.prompt.state import PromptState, names_only_substitute

SUB = names_only_substitute("User", "Aria")
DEEPSEEK = ReasoningTemplate(
    name="DeepSeek", prefix="<think>\n", suffix="\n</think>", separator="\n\n"
)


def test_parse_strict_needs_the_block_first() -> None:
    parsed = parse_reasoning("  <think> plan </think>  Answer.")
    assert parsed is not None
    assert (parsed.reasoning, parsed.content) == ("plan", "Answer.")
    middle = parse_reasoning("Answer <think>x</think> more")
    assert middle is not None and (middle.reasoning, middle.content) == (
        "",
        "Answer <think>x</think> more",
    )
    lax = parse_reasoning("Answer <think>x</think> more", strict=False)
    assert lax is not None and (lax.reasoning, lax.content) == ("x", "Answer  more")


def test_parse_without_prefix_or_suffix_is_none_and_untrimmed_keeps_spaces() -> None:
    assert parse_reasoning("x", ReasoningTemplate(prefix="", suffix="")) is None
    parsed = parse_reasoning("<think>\n a \n</think>\nB", DEEPSEEK, trim=False)
    assert parsed is not None and parsed.reasoning == " a " and parsed.content == "\nB"


def test_stream_parser_splits_as_text_arrives() -> None:
    parser = ReasoningStreamParser()
    assert parser.update("<thi").content == ""
    step = parser.update("<think>pla")
    assert (step.reasoning, step.content, parser.state) == ("pla", "", "thinking")
    step = parser.update("<think>plan</think>\nHello")
    assert (step.reasoning, step.content, parser.state) == ("plan", "Hello", "done")
    plain = ReasoningStreamParser()
    assert plain.update("Hello there").content == "Hello there"
    continued = ReasoningStreamParser(prefill="<think>earlier ")
    assert continued.update("more</think>done").reasoning == "earlier more"


def _state(add: bool, limit: int = 1) -> PromptState:
    def bot(text: str, reasoning: str | None) -> Message:
        return Message.new("Aria", text, is_user=False, extra=MessageExtra(reasoning=reasoning))

    return PromptState(
        character=Character(name="Aria"),
        messages=[
            bot("one", "r1"),
            Message.new("User", "q", is_user=True),
            bot("two", "r2"),
            bot("", "r3"),
        ],
        reasoning=ReasoningSettings(add_to_prompts=add, max_additions=limit),
        reasoning_template=ReasoningTemplate(),
    )


def test_add_to_prompts_newest_first_up_to_the_limit() -> None:
    state = _state(True, 2)
    chat = list(enumerate(state.messages))
    out = add_reasoning_to_messages(state, chat, kind="normal", substitute=SUB)
    assert out == {3: "<think>r3</think>\n", 2: "<think>r2</think>\ntwo"}
    assert add_reasoning_to_messages(_state(False), chat, kind="normal", substitute=SUB) == {}


def test_continued_message_gets_an_open_block() -> None:
    state = _state(False)
    chat = list(enumerate(state.messages))
    out = add_reasoning_to_messages(state, chat, kind="continue", substitute=SUB)
    assert out == {3: "<think>r3"}
