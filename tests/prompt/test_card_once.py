"""Card fields are macro-evaluated once per build, as SillyTavern's ``Generate`` does.

The world-info scan reads the card texts (``global_scan_data``) and the prompt shows them; both
must see the same evaluation, so a ``{{random}}`` in the description is rolled once and an
``{{incvar}}`` moves once per build.
"""

from __future__ import annotations

import random

import pytest

from tavernkit.models.character import Card
from tavernkit.models.chat import Chat, ChatHeader, ChatMetadata, Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState, ScopedBook
from tavernkit.models.templates import ContextTemplate
from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.pipeline import PromptTarget, prepare
from tavernkit.text.tokens import ByteEstimateTokenizer
from tavernkit.text.variables import InMemoryVariables

DESCRIPTION = "{{incvar::builds}}{{setvar::side::{{random::north::south}}}}Faces {{getvar::side}}."


def _state(main_api: str) -> ChatState:
    card = Card.model_validate(
        {
            "spec": "chara_card_v2",
            "spec_version": "2.0",
            "data": {"name": "Wren", "description": DESCRIPTION},
        }
    )
    book = Lorebook()
    for side in ("north", "south"):
        book.new_entry(
            key=[f"Faces {side}"],
            content=f"LORE-{side.upper()}",
            match_character_description=True,
        )
    settings = Settings()
    settings.prompt.main_api = main_api
    chat = Chat(
        header=ChatHeader.new(ChatMetadata()),
        messages=[Message.new("Ada", "Which way?", is_user=True)],
    )
    return ChatState(
        settings=settings,
        card=card,
        books=[ScopedBook(name="compass", scope="global", book=book)],
        chat_preset=ChatCompletionPreset() if main_api == "openai" else None,
        # the text family shows world info only where the story string asks for it
        context=ContextTemplate(story_string="{{wiBefore}}\n{{description}}\n"),
        chat=chat,
    )


def _text(prompt: AssembledChat | AssembledText) -> str:
    if isinstance(prompt, AssembledText):
        return prompt.prompt
    return "\n".join(str(m.get("content", "")) for m in prompt.messages)


@pytest.mark.parametrize("main_api", ["openai", "textgenerationwebui"])
def test_a_card_macro_is_evaluated_once_and_shared_with_the_scan(main_api: str) -> None:
    state = _state(main_api)
    sides = set()
    for seed in range(12):
        variables = InMemoryVariables()
        prompt = prepare(
            state,
            PromptTarget(tokenizer=ByteEstimateTokenizer()),
            variables=variables,
            rng=random.Random(seed).random,
            dry_run=True,
        ).prompt
        text = _text(prompt)
        side = str(variables.get("side"))
        sides.add(side)
        other = "south" if side == "north" else "north"
        # the prompt, the variable and the scan all saw the one roll
        assert f"Faces {side}." in text
        assert f"LORE-{side.upper()}" in text
        assert f"LORE-{other.upper()}" not in text
        assert f"Faces {other}." not in text
        # one evaluation per build: the counter moved once
        assert variables.get("builds") == 1
    assert sides == {"north", "south"}  # the roll is real, not a constant
