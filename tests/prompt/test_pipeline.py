"""The prompt pipeline's one step (:func:`tavernkit.prompt.pipeline.prepare`) and its one
answer to "which API family is this" (:func:`tavernkit.prompt.from_chat_state.main_api_of`)."""

from __future__ import annotations

import random

import pytest

from tavernkit.models.character import Card
from tavernkit.models.chat import Chat, ChatHeader, ChatMetadata, Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.models.state import BookScope, ChatState, ScopedBook
from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.from_chat_state import main_api_of
from tavernkit.prompt.pipeline import PromptTarget, begin, prepare
from tavernkit.text.tokens import ByteEstimateTokenizer
from tavernkit.worldinfo.result import WorldInfoResult


def _state(scope: BookScope = "global", main_api: str = "openai") -> ChatState:
    card = Card.model_validate(
        {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Wren"}}
    )
    book = Lorebook()
    book.new_entry(key=["lamp"], content="LORE-LAMP")
    settings = Settings()
    settings.prompt.main_api = main_api
    chat = Chat(
        header=ChatHeader.new(ChatMetadata()),
        messages=[Message.new("Ada", "Is the lamp lit?", is_user=True)],
    )
    return ChatState(
        settings=settings,
        card=card,
        books=[ScopedBook(name="lore", scope=scope, book=book)],
        chat_preset=ChatCompletionPreset(),
        chat=chat,
    )


@pytest.mark.parametrize(
    ("family", "api", "expected"),
    [
        ("chat", "chat", "openai"),
        ("chat", "local", "openai"),
        ("text", "text", "textgenerationwebui"),
        ("text", "kobold", "kobold"),
        ("text", "novel", "novel"),
    ],
)
def test_main_api_of_a_resolved_connection(family: str, api: str, expected: str) -> None:
    assert main_api_of(family=family, api=api) == expected


def test_main_api_of_a_state_is_its_profile_then_its_settings() -> None:
    state = _state(main_api="kobold")
    assert main_api_of(state) == "kobold"
    profiled = state.model_copy(update={"profile": ConnectionProfile(name="p", api="novel")})
    assert main_api_of(profiled) == "novel"
    # a profile's family wins over the settings, whichever way round
    chat = state.model_copy(update={"profile": ConnectionProfile(name="c", api="chat")})
    assert main_api_of(chat) == "openai"


def test_the_target_family_picks_the_builder() -> None:
    state = _state()
    assert isinstance(prepare(state, rng=random.Random(0).random).prompt, AssembledChat)
    text = prepare(state, PromptTarget(main_api="textgenerationwebui"), rng=random.Random(0).random)
    assert isinstance(text.prompt, AssembledText)
    assert text.session.prompt_state.settings.main_api == "textgenerationwebui"


def test_a_characters_extra_book_scans_as_a_character_book() -> None:
    # SillyTavern's "additional lore books" of a character: the store tags them
    # ``character_extra``; the scan knows only the four scopes it orders by.
    assembled = prepare(_state("character_extra"), rng=random.Random(0).random)
    assert assembled.wi is not None
    assert [e.content for e in assembled.wi.activated] == ["LORE-LAMP"]
    assert isinstance(assembled.prompt, AssembledChat)
    assert any("LORE-LAMP" in str(m.get("content")) for m in assembled.prompt.messages)


def test_a_given_scan_is_reused_not_redone() -> None:
    state = _state()
    given = WorldInfoResult()
    assembled = prepare(state, wi=given)
    assert assembled.wi is given
    assert isinstance(assembled.prompt, AssembledChat)
    assert not any("LORE-LAMP" in str(m.get("content")) for m in assembled.prompt.messages)


def test_a_session_evaluates_the_card_once_and_counts_with_the_target_tokenizer() -> None:
    state = _state()
    tokens = ByteEstimateTokenizer()
    session = begin(state, PromptTarget(tokenizer=tokens))
    assert session.tokenizer is tokens
    assert session.card is session.card
    # without one: the model's tokenizer for chat completion, made when first asked for
    assert begin(state).tokenizer is not tokens


def test_a_dry_build_changes_no_variable_of_the_state() -> None:
    state = _state()
    chat = state.chat
    assert chat is not None
    chat.messages[0].mes = "{{setvar::lit::yes}}Is the lamp lit?"
    assembled = prepare(state, dry_run=True, rng=random.Random(0).random)
    assert assembled.session.substitute.env.variables.get("lit") == "yes"
    assert chat.metadata.variables in (None, {})
