"""Slot routing for the embedded model (pure: no model is loaded)."""

from __future__ import annotations

from typing import Any

from tavernkit.providers.local_slots import Claim, SlotRouter, prompt_print

MAIN = "Write Wren's next reply in a fictional chat between Wren and User."
LAMP = "The Saltmarrow lamp is a first-order Fresnel lens turned by a weight-driven clockwork."
CARD = "Wren is the last keeper of the Saltmarrow lighthouse, a stubby tower of grey stone."
EXAMPLES = '*She taps the spine of the nearest logbook.* "Eleven years, four months."'
GREETING = '*The door opens a hand\'s width.* "Tide caught you, did it?"'


def chat(*history: str, lamp: bool = False, card: str = CARD) -> dict[str, Any]:
    system = [MAIN, *([LAMP] if lamp else []), card, EXAMPLES]
    messages = [{"role": "system", "content": text} for text in system]
    messages.append({"role": "assistant", "content": GREETING})
    for n, text in enumerate(history):
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": text})
    return {"messages": messages}


def turn(router: SlotRouter, body: dict[str, Any], reply: str = "") -> Claim:
    shape = prompt_print("chat", body)
    claim = router.claim(shape)
    router.release(claim, shape, reply)
    return claim


def test_a_chat_goes_back_to_its_slot_when_an_entry_near_the_top_drops_out() -> None:
    router = SlotRouter(2)
    first = turn(router, chat("Hello! Who are you?", lamp=True), "I keep the light here, love.")
    second = turn(router, chat("Hello! Who are you?", "I keep the light here, love.", "Why?"))
    assert first.slot is not None
    # pinned to its own slot: llama.cpp's prefix rule would see only MAIN in common
    assert second == Claim(first.slot, first.slot)


def test_a_swipe_goes_back_to_the_slot_that_answered_the_same_message() -> None:
    router = SlotRouter(2)
    first = turn(router, chat("Hello! Who are you?"), "Nobody you'd know, stranger.")
    again = turn(router, chat("Hello! Who are you?"))
    assert again == Claim(first.slot, first.slot)


def test_two_chats_of_one_card_interleaved_keep_their_own_slots() -> None:
    router = SlotRouter(2)
    a_history = ["Hello! Who are you?", "The keeper of this light, and yours tonight."]
    b_history = ["Is the reef dangerous?", "Forty-one wrecks say it is, traveller."]
    a1 = turn(router, chat(a_history[0]), a_history[1])
    b1 = turn(router, chat(b_history[0]), b_history[1])
    assert a1.slot != b1.slot  # a new chat takes the slot nobody used
    a2 = turn(router, chat(*a_history, "And the lamp?", lamp=True), "The Old Man, I call it.")
    b2 = turn(router, chat(*b_history, "Which wreck was last?"), "The Margery Ann, nine years.")
    a3 = turn(router, chat(*a_history, "And the lamp?", "The Old Man, I call it.", "Why?"))
    assert (a2.id_slot, a3.id_slot) == (a1.slot, a1.slot)
    assert b2.id_slot == b1.slot


def test_a_new_chat_is_left_to_llama_cpp_in_the_slot_it_will_take() -> None:
    """No slot holds the chat: llama.cpp chooses (so its RAM cache saves the slot it takes
    over), and its choice, the least recently used free slot, is what the router notes."""
    router = SlotRouter(2)
    a = turn(router, chat("Hello!", card="Ada is a sailor who never learned to swim at all."), "Hi")
    b = turn(router, chat("Hello!", card="Bo is a pirate who lost a leg and a parrot."), "Yo")
    assert a == Claim(1, -1)  # of two never used, llama.cpp takes the last
    assert b == Claim(0, -1)
    c = turn(router, chat("Hello!", card="Cy is a cook aboard the ship, and a bad one."), "Eh")
    assert c == Claim(1, -1)  # a's slot, the least recently used


def test_a_busy_own_slot_is_waited_for_and_a_full_house_is_forgotten() -> None:
    router = SlotRouter(2)
    history = ("Hello! Who are you?", "The keeper of the Saltmarrow light.")
    a1 = turn(router, chat(history[0]), history[1])
    shape = prompt_print("chat", chat(*history, "Tell me more about it."))
    mine = router.claim(shape)
    assert mine == Claim(a1.slot, a1.slot)  # pinned, even while busy below
    other = router.claim(prompt_print("chat", chat("Hi", card="Someone else entirely, far.")))
    third = prompt_print("chat", chat("Hey", card="Yet another card, with its own story."))
    full = router.claim(third)
    assert full == Claim(None, -1)  # every slot busy: llama.cpp takes whichever frees first
    router.release(mine, shape, "It is a tower of grey stone.")
    router.release(full, third, "Hello there, whoever you are.")
    router.release(other, third, "")
    # the slot that finished before the unplaced request ended is no longer trusted
    again = router.claim(prompt_print("chat", chat(*history, "Tell me more about it.", "Go on")))
    assert again.id_slot == -1


def test_text_prompts_follow_the_reply_they_generated() -> None:
    router = SlotRouter(2)
    story = f"{MAIN}\n{LAMP}\n{CARD}\n{EXAMPLES}\n"
    first_body = {"prompt": f"{story}User: Hello! Who are you?\nWren:"}
    first = turn_text(router, first_body, " The keeper of this light, and yours.")
    second_body = {
        "prompt": f"{MAIN}\n{CARD}\n{EXAMPLES}\nUser: Hello! Who are you?\n"
        "Wren: The keeper of this light, and yours.\nUser: Why?\nWren:"
    }
    assert turn_text(router, second_body, "") == Claim(first.slot, first.slot)


def turn_text(router: SlotRouter, body: dict[str, Any], reply: str) -> Claim:
    shape = prompt_print("text", body)
    claim = router.claim(shape)
    router.release(claim, shape, reply)
    return claim


def test_a_refused_request_leaves_its_slot_unknown() -> None:
    router = SlotRouter(2)
    history = ("Hello! Who are you?", "The keeper of the Saltmarrow light.")
    first = turn(router, chat(history[0]), history[1])
    shape = prompt_print("chat", chat(*history, "Tell me more about it."))
    refused = router.claim(shape)
    assert refused.id_slot == first.slot
    router.release(refused, None, "")
    # its chat is no longer pinned there: llama.cpp chooses (and saves that slot to RAM)
    assert router.claim(shape).id_slot == -1


def test_a_slot_being_taken_over_no_longer_draws_its_old_chat() -> None:
    router = SlotRouter(1)
    history = ("Hello! Who are you?", "The keeper of the Saltmarrow light.")
    first = turn(router, chat(history[0]), history[1])
    assert first.slot == 0
    other = prompt_print("chat", chat("Hi", card="Someone else entirely, far away."))
    taking = router.claim(other)
    assert taking == Claim(0, -1)
    # the first chat's next turn is not pinned to a slot that will hold the other chat
    assert router.claim(prompt_print("chat", chat(*history, "Go on."))) == Claim(None, -1)


def test_a_chat_that_sent_the_same_line_as_another_does_not_take_its_slot() -> None:
    """Chats of one card whose users wrote the same words (issue 40: 4 such chats on 2 slots
    evaluated every prompt whole): the other chat's slot is not its own; llama.cpp chooses,
    saving that slot to its RAM cache and restoring this chat's prefix from there."""
    router = SlotRouter(2)
    a1 = turn(router, chat("Hello! Who are you?"), "The keeper of this light, and yours.")
    b_main = {"role": "system", "content": "Another chat's main prompt, written for it."}
    b_body = chat("Hello! Who are you?")
    b_body["messages"][0] = b_main
    b1 = turn(router, b_body, "Nobody you would know, stranger.")
    assert b1.id_slot == -1 and b1.slot != a1.slot  # no longer pinned to A's slot
    c_body = chat("Hello! Who are you?", "Someone else entirely, friend.", "Hello! Who are you?")
    c = turn(router, c_body)
    assert c.id_slot == -1  # its last line was A's, but A's reply is not in it


def test_a_text_prompt_s_reply_is_found_on_the_line_it_went_on_from() -> None:
    router = SlotRouter(2)
    first = turn_text(
        router, {"prompt": f"{MAIN}\n{CARD}\nUser: Hi\nWren:"}, " Evening, traveller."
    )
    body = {"prompt": f"{CARD}\nUser: Hi\nWren: Evening, traveller.\nUser: And?\nWren:"}
    assert turn_text(router, body, "") == Claim(first.slot, first.slot)
