"""The embedded model's KV cache across the turns of real chats, shaped like SillyTavern's
default preset on the demo card: the main prompt, World Info "before" (a lorebook entry), the
card, World Info "after", the example messages, the greeting, then the history. Between turns
the lorebook entries drop out of the scan window (the finding of issue 40: turn 2 of the demo
chat reused nothing), and a second chat of the same card runs interleaved with the first.

Skipped when the ``local`` extra or the GGUF is absent. The replies are generated (random):
the assertions are on how much of each prompt llama.cpp evaluated, not on the text."""

from __future__ import annotations

import uuid

from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling

from ._local import real_provider

LAMP = (
    "The Saltmarrow lamp is a first-order Fresnel lens turned by a weight-driven clockwork "
    "that must be wound every thirty minutes through the night. Wren calls it 'the Old Man'."
)
CARD = (
    "Wren is the last keeper of the Saltmarrow lighthouse, a stubby tower of grey stone on a "
    "tidal island that is cut off from the mainland twice a day. She is in her late thirties, "
    "weathered, freckled, with a rope-burn scar across her left palm and ink permanently under "
    "her fingernails from the logbooks she keeps. She is dry-humoured, patient, stubborn about "
    "routine, privately lonely, curious about strangers but slow to trust them, precise with "
    "numbers and vague with feelings. The visitor has been caught by the rising tide while "
    "exploring the causeway and knocked on the lighthouse door as the light faded. "
) * 2
CAUSEWAY = (
    "A cobbled causeway links the island to the mainland village of Pell. It is passable for "
    "about three hours either side of low water; the sea covers it quickly and without warning."
)
EXAMPLES = (
    ("How long have you been out here alone?", "\"Eleven years, four months, and most of a "
     "Tuesday. Not alone, though. The lamp talks back, if you listen to the clockwork.\""),
    ("Is the reef really that dangerous?", "\"Forty-one wrecks I can name, and those are only "
     "the ones that left a mast to mark them. At high water they walk on you.\""),
)  # fmt: skip
GREETING = '*The door opens a hand\'s width.* "Tide caught you, did it? Come up, mind the step."'
A_TURNS = (
    "Hello! Who are you?",
    "What is it like living here?",
    "Have you ever seen a storm take a ship?",
    "What do you eat out here?",
    "Tell me about the strangest night you remember.",
)
B_TURNS = ("Can I wait here until morning?", "Do you have any tea?", "Why do you stay?")
#: at most this share of a later turn's prompt is evaluated: the new messages (the reply and
#: the next message, some 40 tokens of a prompt of 600-800)
NEW_SHARE = 0.15


def prompt(main: str, history: list[str], entries: tuple[str, ...]) -> ChatPrompt:
    """The demo card's prompt with the lorebook ``entries`` that are active this turn."""
    messages = [ChatMessage("system", main)]
    messages += [ChatMessage("system", LAMP)] if "lamp" in entries else []
    messages.append(ChatMessage("system", CARD))
    messages += [ChatMessage("system", CAUSEWAY)] if "causeway" in entries else []
    for question, answer in EXAMPLES:
        messages += [ChatMessage("system", "[Example Chat]"), ChatMessage("system", question)]
        messages.append(ChatMessage("system", answer))
    messages += [ChatMessage("system", "[Start a new Chat]"), ChatMessage("assistant", GREETING)]
    for n, text in enumerate(history):
        messages.append(ChatMessage("user" if n % 2 == 0 else "assistant", text))
    return ChatPrompt(tuple(messages), sampling=Sampling(max_tokens=16))


class Chat:
    """One chat: its history, and ``(prompt tokens, evaluated)`` of each turn."""

    def __init__(self, main: str) -> None:
        self.main = main
        self.history: list[str] = []
        self.turns: list[tuple[int, int]] = []

    async def send(self, model: LocalLlamaProvider, text: str, *entries: str) -> None:
        self.history.append(text)
        result = await model.complete(prompt(self.main, self.history, entries))
        self.history.append(result.text.strip() or "...")
        usage = result.usage
        assert usage is not None
        assert usage.input_tokens is not None
        assert usage.cached_input_tokens is not None
        evaluated = usage.input_tokens - usage.cached_input_tokens
        assert usage.raw is not None
        assert usage.raw["timings"]["prompt_n"] == evaluated  # llama.cpp's own count
        self.turns.append((usage.input_tokens, evaluated))

    def later_turns_evaluate_only_what_is_new(self) -> bool:
        return all(evaluated <= NEW_SHARE * size for size, evaluated in self.turns[1:])


async def test_from_the_second_turn_on_only_the_new_messages_are_evaluated() -> None:
    """Chat A's lorebook entries drop out on turns 2 and 3 (the prefix then ends right after
    the main prompt); chat B, of the same card, starts after A's third turn and alternates with
    it. Each keeps its own cache: a later turn evaluates its new messages only."""
    model = real_provider()
    # a main prompt no other test has sent: no slot holds any of it yet
    main = f"Write Wren's next reply in a fictional chat between Wren and User. ({uuid.uuid4()})"
    a, b = Chat(main), Chat(main)
    await a.send(model, A_TURNS[0], "lamp", "causeway")
    await a.send(model, A_TURNS[1], "causeway")
    await a.send(model, A_TURNS[2])
    for a_text, b_text in zip(A_TURNS[3:], B_TURNS, strict=False):
        await b.send(model, b_text, "causeway")
        await a.send(model, a_text)
    await b.send(model, B_TURNS[2])
    assert a.turns[0][1] > 0.9 * a.turns[0][0]  # a fresh chat: (nearly) all of it
    assert len(a.turns) == 5
    assert a.later_turns_evaluate_only_what_is_new(), a.turns
    assert b.later_turns_evaluate_only_what_is_new(), b.turns


async def test_more_chats_than_slots_whose_users_write_the_same_lines() -> None:
    """Three chats on two slots, each user writing the same lines (before: each was pinned to
    the slot of the chat that had sent that line, whose cache was thrown away unsaved, and
    every prompt was evaluated whole). A chat coming back finds its prompt in llama.cpp's RAM
    cache, or in its slot."""
    model = real_provider()
    chats = [Chat(f"Write Wren's next reply. ({uuid.uuid4()})") for _ in range(3)]
    for text in A_TURNS[:2]:
        for chat in chats:
            await chat.send(model, text, "lamp")
    assert all(chat.later_turns_evaluate_only_what_is_new() for chat in chats), [
        chat.turns for chat in chats
    ]
