"""The fast paths of a chat-completion build behave exactly like the plain algorithms they
replaced: the lazy newest-first history, the index-only core chat, the pre-sorted in-chat
injection, the indexed prompt collection and the one-pass scan texts. Each plain algorithm is
restated here as the oracle, and hypothesis compares the two on generated inputs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.jscompat import js_trim
from tavernkit.models.character import Character
from tavernkit.models.chat import Message, MessageExtra, ToolInvocation
from tavernkit.models.preset import DEFAULT_PROMPTS, ChatCompletionPreset
from tavernkit.prompt import PromptState, build_chat_completion
from tavernkit.prompt import chat_history as history_module
from tavernkit.prompt.chat_history import (
    MAX_INJECTION_DEPTH,
    ChatHistory,
    OpenAIMessage,
    chat_messages,
    inject_prompts,
)
from tavernkit.prompt.collection import Prompt, PromptCollection
from tavernkit.prompt.core_chat import core_chat
from tavernkit.prompt.extensions import ROLE_NAMES, extension_prompt_text
from tavernkit.prompt.state import (
    AuthorsNote,
    ExtensionPosition,
    ExtensionPrompt,
    Substitute,
    names_only_substitute,
)
from tavernkit.prompt.wi_scan import scan_texts

NAMES = ("Aria", "User", "Narrator")
TEXT = st.text(alphabet="ab {}\r\n", max_size=12)


@st.composite
def messages(draw: st.DrawFn, max_size: int = 30) -> list[Message]:
    out = []
    for i in range(draw(st.integers(0, max_size))):
        is_system = draw(st.booleans()) and draw(st.booleans())
        tools = is_system and draw(st.booleans())
        extra = MessageExtra(
            type="narrator" if draw(st.integers(0, 9)) == 0 else None,
            tool_invocations=(
                [ToolInvocation(id=f"c{i}", name="roll", parameters="{}", result="4")]
                if tools
                else None
            ),
        )
        out.append(
            Message.new(
                draw(st.sampled_from(NAMES)),
                draw(TEXT),
                is_user=draw(st.booleans()),
                is_system=is_system,
                extra=extra,
            )
        )
    return out


# --- ChatHistory is a newest-first list made on demand ----------------------------------------


def _converted(chat: list[tuple[int, Message]]) -> list[OpenAIMessage]:
    return list(chat_messages(chat, user="User", names_behavior=0))


@given(
    messages(),
    st.lists(
        st.tuples(st.sampled_from(["splice", "pop", "get", "len"]), st.integers(-3, 40)),
        max_size=8,
    ),
)
def test_chat_history_behaves_like_the_eager_list(
    chat: list[Message], operations: list[tuple[str, int]]
) -> None:
    pairs = list(enumerate(chat))
    lazy = chat_messages(pairs, user="User", names_behavior=0)
    model = _converted(pairs)
    for op, n in operations:
        if op == "splice" and n >= 0:
            items = [OpenAIMessage(role="system", content=f"inj{n}", injected=True)]
            lazy.splice(n, items)
            model[n:n] = items
        elif op == "pop" and model:
            assert lazy.pop_newest() == model.pop(0)
        elif op == "get" and -len(model) <= n < len(model):
            assert lazy[n] == model[n]
        assert len(lazy) == len(model)
    assert list(lazy) == model
    assert lazy[:] == model


def test_chat_history_converts_only_what_is_read(monkeypatch: Any) -> None:
    made: list[int] = []
    original = history_module._Converter.make

    def counting(self: Any, index: int, message: Message) -> OpenAIMessage:
        made.append(index)
        return original(self, index, message)

    monkeypatch.setattr(history_module._Converter, "make", counting)
    chat = [Message.new("Aria", f"m{i}", is_user=bool(i % 2)) for i in range(1000)]
    lazy = chat_messages(list(enumerate(chat)), user="User", names_behavior=0)
    assert len(lazy) == 1000 and made == []
    assert lazy[2].content == "m997"
    assert made == [999, 998, 997]
    assert lazy[-1].content == "m0"  # the oldest: everything in between is made
    assert len(made) == 1000


def test_a_long_chat_build_converts_only_the_messages_that_fit(monkeypatch: Any) -> None:
    made: list[int] = []
    original = history_module._Converter.make

    def counting(self: Any, index: int, message: Message) -> OpenAIMessage:
        made.append(index)
        return original(self, index, message)

    monkeypatch.setattr(history_module._Converter, "make", counting)
    chat = [Message.new("Aria", "x" * 50, is_user=bool(i % 2)) for i in range(2000)]
    preset = ChatCompletionPreset.model_validate(
        {"prompts": [dict(p) for p in DEFAULT_PROMPTS], "openai_max_context": 2000}
    )
    state = PromptState(character=Character(name="Aria"), messages=chat, preset=preset)
    result = build_chat_completion(
        state, tokenizer=_CharTokenizer(), substitute=names_only_substitute("User", "Aria")
    )
    history = [b for b in result.blocks if b.source == "history"]
    assert 0 < len(history) < 100
    assert len(made) <= len(history) + 1 + history_module._AHEAD


class _CharTokenizer:
    def count(self, text: str) -> int:
        return len(text)


def test_a_chat_history_without_converter_holds_only_its_head() -> None:
    head = [OpenAIMessage(role="user", content="a"), OpenAIMessage(role="user", content="b")]
    lazy = ChatHistory(head=head)
    assert len(lazy) == 2 and list(lazy) == head and lazy[-1] is head[1]


# --- core_chat ---------------------------------------------------------------------------------


@given(messages(), st.sampled_from(["normal", "swipe", "continue"]), st.booleans())
def test_core_chat_equals_the_filtered_list(chat: list[Message], kind: str, tools: bool) -> None:
    expected = [
        (i, m)
        for i, m in enumerate(chat)
        if not m.is_system or (tools and m.extra.tool_invocations)
    ]
    if kind == "swipe" and expected:
        expected.pop()
    view = core_chat(chat, kind, tools=tools)
    assert list(view) == expected
    assert len(view) == len(expected)
    assert view[:] == expected
    if expected:
        assert view[-1] == expected[-1] and view[0] == expected[0]


# --- in-chat injection -------------------------------------------------------------------------


def _inject_oracle(
    absolute: list[Prompt],
    messages: list[OpenAIMessage],
    extension_prompts: dict[str, ExtensionPrompt],
    substitute: Substitute,
) -> list[OpenAIMessage]:
    """``populationInjectionPrompts`` restated plainly (a list, ``getExtensionPrompt`` per
    depth and role): the algorithm the fast version replaced."""
    in_chat = [e for e in extension_prompts.values() if e.position == ExtensionPosition.IN_CHAT]
    depths = {p.injection_depth for p in absolute if p.injection_depth is not None}
    if any(e.depth is None for e in in_chat if e.value):
        depths.update(range(MAX_INJECTION_DEPTH + 1))
    else:
        depths.update(e.depth for e in in_chat if e.value and e.depth is not None)
    out = list(messages)
    inserted = 0
    for depth in sorted(d for d in depths if 0 <= d <= MAX_INJECTION_DEPTH):
        at_depth = [p for p in absolute if p.injection_depth == depth and p.content]
        groups: dict[int, list[Prompt]] = {100: []}
        for p in at_depth:
            groups.setdefault(p.injection_order if p.injection_order is not None else 100, [])
            groups[p.injection_order if p.injection_order is not None else 100].append(p)
        role_messages = []
        for order in sorted(groups, reverse=True):
            for role_index, role in enumerate(ROLE_NAMES):
                joined = "\n".join(p.content for p in groups[order] if p.role == role)
                extension = (
                    extension_prompt_text(
                        extension_prompts,
                        substitute,
                        position=ExtensionPosition.IN_CHAT,
                        depth=depth,
                        role=role_index,
                        wrap=False,
                    )
                    if order == 100
                    else ""
                )
                content = "\n".join(js_trim(x) for x in (joined, extension) if x)
                if content:
                    role_messages.append(OpenAIMessage(role=role, content=content, injected=True))
        if role_messages:
            out[depth + inserted : depth + inserted] = role_messages
            inserted += len(role_messages)
    return out


absolute_prompts = st.lists(
    st.builds(
        Prompt,
        identifier=st.sampled_from(["a", "b", "c", "d"]),
        role=st.sampled_from(ROLE_NAMES),
        content=st.sampled_from(["", " one ", "two", "{{char}}"]),
        injection_position=st.just(1),
        injection_depth=st.one_of(st.none(), st.integers(-1, 6)),
        injection_order=st.one_of(st.none(), st.sampled_from([50, 100, 200])),
    ),
    max_size=6,
)
extension_maps = st.dictionaries(
    st.sampled_from(["2_floating_prompt", "DEPTH_PROMPT", "customDepthWI_1_0", "zzz", "Abc"]),
    st.builds(
        ExtensionPrompt,
        value=st.sampled_from(["", " note ", "{{user}} here"]),
        position=st.sampled_from([ExtensionPosition.IN_CHAT, ExtensionPosition.IN_PROMPT]),
        # No "any depth" here: it injects at all 10,001 depths, too slow for many examples.
        depth=st.one_of(st.integers(0, 5), st.just(-(10**9))),
        role=st.one_of(st.none(), st.integers(0, 2)),
    ),
    max_size=4,
)


@given(messages(max_size=12), absolute_prompts, extension_maps)
def test_injection_equals_the_plain_algorithm(
    chat: list[Message], absolute: list[Prompt], extensions: dict[str, ExtensionPrompt]
) -> None:
    sub = names_only_substitute("User", "Aria")
    pairs = list(enumerate(chat))
    expected = _inject_oracle(absolute, _converted(pairs), extensions, sub)
    got = inject_prompts(
        absolute, chat_messages(pairs, user="User", names_behavior=0), extensions, sub
    )
    assert list(got) == expected


@settings(max_examples=5, deadline=None)
@given(messages(max_size=4), absolute_prompts)
def test_injection_of_an_any_depth_prompt_equals_the_plain_algorithm(
    chat: list[Message], absolute: list[Prompt]
) -> None:
    extensions = {"x": ExtensionPrompt("anywhere", ExtensionPosition.IN_CHAT, None, None)}
    sub = names_only_substitute("User", "Aria")
    pairs = list(enumerate(chat))
    expected = _inject_oracle(absolute, _converted(pairs), extensions, sub)
    got = inject_prompts(
        absolute, chat_messages(pairs, user="User", names_behavior=0), extensions, sub
    )
    assert list(got) == expected


# --- prompt collection index -------------------------------------------------------------------


def test_prompt_collection_indexes_the_first_occurrence() -> None:
    collection = PromptCollection([Prompt("main"), Prompt("x", content="1")])
    collection.add(Prompt("x", content="2"))
    collection.add(Prompt("y"))
    assert collection.index("x") == 1 and collection.get("x") == Prompt("x", content="1")
    assert collection.index("y") == 3 and collection.has("main") and not collection.has("z")
    assert collection.index("z") == -1 and collection.get("z") is None
    collection.set(1, Prompt("x", content="3"))
    assert collection.get("x") == Prompt("x", content="3")


def test_prompt_collection_set_keeps_the_identifier() -> None:
    collection = PromptCollection([Prompt("main")])
    with pytest.raises(ValueError, match="other"):
        collection.set(0, Prompt("other"))
    assert collection.get("main") == Prompt("main")


# --- Author's Note interval --------------------------------------------------------------------


@given(st.integers(-1, 5), st.lists(st.booleans(), max_size=12))
def test_note_fires_as_the_counting_rule_says(interval: int, users: list[bool]) -> None:
    chat = [Message.new("U" if u else "A", "t", is_user=u) for u in users]
    count = sum(users)
    if interval <= 0:
        expected = False
    else:
        count = 1 if interval == 1 else count
        if count <= 0:
            expected = False
        elif count >= interval:
            expected = count % interval == 0
        else:
            expected = interval - count == 0
    assert AuthorsNote(prompt="n", interval=interval).fires(chat) is expected


# --- world-info scan texts ---------------------------------------------------------------------


@given(messages(), st.booleans())
def test_scan_texts_equal_the_plain_loop(chat: list[Message], include_names: bool) -> None:
    sub = names_only_substitute("User", "Aria")
    expected: list[str] = []
    first = True
    for m in chat:
        if m.is_system:
            continue
        text = m.text
        if first:
            text, first = sub(text), False
        expected.append(f"{m.name}: {text}" if include_names else text)
    expected.reverse()
    state = PromptState(character=Character(name="Aria"), messages=chat)
    assert scan_texts(state, sub, include_names=include_names) == expected
