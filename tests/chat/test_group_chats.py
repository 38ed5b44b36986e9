"""Group chats end to end through ChatService: stored group -> speaker selection -> one turn
per member against the scripted server on loopback -> stored replies with their speakers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _chat_reads import ChatReads
from tavernkit.chat.deps import TurnDeps
from tavernkit.chat.group_turn import pick_greeting, speaker_for
from tavernkit.chat.prepare import TurnDraft, TurnOverrides, prepare_turn
from tavernkit.errors import Conflict, GenerateTaskError, NotFound
from tavernkit.groups.records import load_group
from tavernkit.groups.rng import Mulberry32
from tavernkit.models.character import Character
from tavernkit.models.chat import Message
from tavernkit.models.group import GroupMember

from ._server import Reply
from .conftest import World


def _card(name: str, talkativeness: float, description: str) -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": description,
            "personality": "",
            "scenario": "",
            "first_mes": f"*{{{{char}}}} waves at {{{{user}}}}.* I am {name}.",
            "mes_example": "",
            "extensions": {"talkativeness": talkativeness},
        },
    }


CARDS = [
    _card("Alice", 0.5, "{{char}} is a knight travelling with {{group}}."),
    _card("Bob", 0.5, "{{char}} is a merchant. Others: {{notChar}}."),
    _card("Cara", 0.5, "{{char}} is a mage."),
]


async def _group(world: World, strategy: int, **fields: Any) -> str:
    for card in CARDS:
        await world.tk.library.import_bytes(json.dumps(card).encode(), source="card.json")
    group = {
        "id": "g1",
        "name": "Camp",
        "members": ["Alice.png", "Bob.png", "Cara.png"],
        "activation_strategy": strategy,
        "generation_mode": 0,
        "disabled_members": [],
        "chat_id": "",
        "chats": [],
        **fields,
    }
    await world.tk.library.import_bytes(json.dumps(group).encode(), source="camp.json")
    info = await world.chats.new_group_chat("Camp", rng=Mulberry32(7))
    return info.id


async def _messages(world: World, chat_id: str) -> list[Message]:
    stored = await world.chats.load(chat_id)
    return [Message.model_validate(m.data) for m in stored.messages]


def _sent(world: World, index: int) -> list[dict[str, Any]]:
    messages = world.server.requests[index].body["messages"]
    assert isinstance(messages, list)
    return messages


async def test_new_group_chat_greets_with_every_member(world: World) -> None:
    chat_id = await _group(world, 1)
    greetings = await _messages(world, chat_id)
    assert [(m.name, m.mes, m.original_avatar) for m in greetings] == [
        ("Alice", "*Alice waves at Ada.* I am Alice.", "Alice.png"),
        ("Bob", "*Bob waves at Ada.* I am Bob.", "Bob.png"),
        ("Cara", "*Cara waves at Ada.* I am Cara.", "Cara.png"),
    ]
    assert greetings[1].force_avatar == "/thumbnail?type=avatar&file=Bob.png"
    info = await world.tk.store.get_chat_info(chat_id, owner=world.tk.owner)
    group = await world.tk.store.get_record("group", "Camp", owner=world.tk.owner)
    assert group.data["chat_id"] == info.name and group.data["chats"] == [info.name]


async def test_list_order_every_member_replies_and_sees_the_earlier_replies(
    world: World,
) -> None:
    chat_id = await _group(world, 1)
    world.server.script(Reply(text="Alice here."), Reply(text="Bob here."), Reply(text="Cara."))
    out = await world.chats.group_turn(chat_id, text="Everyone, report in.")
    assert out.status == "completed" and out.user_message_stored
    assert [(r.name, r.outcome.text) for r in out.replies] == [
        ("Alice", "Alice here."),
        ("Bob", "Bob here."),
        ("Cara", "Cara."),
    ]
    assert len(world.server.requests) == 3
    bob = _sent(world, 1)
    assert bob[1] == {"role": "system", "content": "Bob is a merchant. Others: Alice, Cara."}
    assert {"role": "assistant", "content": "Alice: Alice here."} in bob
    assert bob[-2] == {"role": "assistant", "content": "Alice: Alice here."}
    assert bob[-1] == {"role": "system", "content": "[Write the next reply only as Bob.]"}
    alice = _sent(world, 0)
    assert alice[1]["content"] == "Alice is a knight travelling with Alice, Bob, Cara."
    assert {"role": "user", "content": "Everyone, report in."} in alice

    stored = await _messages(world, chat_id)
    user, *replies = stored[3:]
    assert (user.is_user, user.mes) == (True, "Everyone, report in.")
    assert [(m.name, m.mes, m.original_avatar) for m in replies] == [
        ("Alice", "Alice here.", "Alice.png"),
        ("Bob", "Bob here.", "Bob.png"),
        ("Cara", "Cara.", "Cara.png"),
    ]
    assert len({m.extra.gen_id for m in replies}) == 1  # one batch


async def test_natural_order_mentions_come_first_and_rolls_use_the_rng(world: World) -> None:
    chat_id = await _group(world, 0)
    world.server.script(Reply(text="Light!"), Reply(text="Me too."))
    # Rolls of 0.99 beat no talkativeness of 0.5: only the mention speaks...
    out = await world.chats.group_turn(chat_id, text="Cara, cast a light.", rng=lambda: 0.99)
    assert [r.name for r in out.replies] == ["Cara"]
    # ...and SillyTavern's recorded draws (mulberry32, seed 20261201) add Alice after Cara.
    out = await world.chats.group_turn(chat_id, text="Cara?", rng=Mulberry32(20261201))
    assert [r.name for r in out.replies] == ["Cara", "Alice"]


async def test_muted_members_are_never_drafted_but_can_be_triggered(world: World) -> None:
    chat_id = await _group(world, 1, disabled_members=["Bob.png"])
    world.server.script(Reply(text="ok"))
    out = await world.chats.group_turn(chat_id, text="Report.")
    assert [r.name for r in out.replies] == ["Alice", "Cara"]
    out = await world.chats.trigger(chat_id, "bob")
    assert [r.name for r in out.replies] == ["Bob"] and not out.user_message_stored
    assert (await _messages(world, chat_id))[-1].original_avatar == "Bob.png"


async def test_manual_strategy_posts_typed_input_and_nobody_replies(world: World) -> None:
    chat_id = await _group(world, 2)
    out = await world.chats.group_turn(chat_id, text="Just noting this.")
    assert out.replies == [] and out.user_message_stored and out.status == "completed"
    assert world.server.requests == []
    assert (await _messages(world, chat_id))[-1].mes == "Just noting this."
    # An empty box drafts one enabled member at random (shuffled, first taken).
    world.server.script(Reply(text="I'll answer."))
    out = await world.chats.group_turn(chat_id, rng=Mulberry32(20261201))
    assert [r.name for r in out.replies] == ["Bob"]


async def test_pooled_order_picks_one_who_has_not_spoken_since_the_user(world: World) -> None:
    chat_id = await _group(world, 3)
    world.server.script(Reply(text="First."))
    out = await world.chats.group_turn(chat_id, text="Who goes?", rng=lambda: 0.0)
    assert [r.name for r in out.replies] == ["Alice"]
    # No new input: Alice has spoken since the user, so the pool is Bob and Cara.
    out = await world.chats.group_turn(chat_id, rng=lambda: 0.0)
    assert [r.name for r in out.replies] == ["Bob"]
    out = await world.chats.group_turn(chat_id, rng=lambda: 0.0)
    assert [r.name for r in out.replies] == ["Cara"]
    # Everyone spoke: anyone but the last speaker.
    out = await world.chats.group_turn(chat_id, rng=lambda: 0.99)
    assert [r.name for r in out.replies] == ["Bob"]


async def test_regenerate_replaces_the_last_batch(world: World) -> None:
    chat_id = await _group(world, 1)
    world.server.script(Reply(text="one"))
    await world.chats.group_turn(chat_id, text="Go.")
    before = len(await _messages(world, chat_id))
    world.server.script(Reply(text="two"))
    out = await world.chats.group_turn(chat_id, "regenerate")
    assert [r.name for r in out.replies] == ["Alice", "Bob", "Cara"]
    after = await _messages(world, chat_id)
    assert len(after) == before
    assert [m.mes for m in after[-3:]] == ["two", "two", "two"]


async def test_regenerating_a_batch_a_branch_continues_keeps_that_branch(world: World) -> None:
    store, owner = world.tk.store, world.tk.owner
    chat_id = await _group(world, 1)
    world.server.script(Reply(text="one"))
    await world.chats.group_turn(chat_id, text="Go.")
    count = len(await _messages(world, chat_id))
    other = await store.fork_chat(chat_id, count - 1, owner=owner)  # another last reply
    await store.append_message(chat_id, {"name": "Cara", "mes": "other"}, owner=owner)
    await store.switch_branch(chat_id, "main", owner=owner)

    world.server.script(Reply(text="two"))
    await world.chats.group_turn(chat_id, "regenerate")
    after = await _messages(world, chat_id)
    assert len(after) == count
    assert [m.mes for m in after[-4:]] == ["Go.", "two", "two", "two"]
    tree = await store.chat_tree(chat_id, owner=owner)
    assert len(tree.branches) == 3 and tree.current not in ("main", other)
    for branch, tail in (("main", ["one", "one", "one"]), (other, ["one", "one", "other"])):
        await store.switch_branch(chat_id, branch, owner=owner)
        assert [m.mes for m in await _messages(world, chat_id)][-3:] == tail


async def test_quiet_impersonate_and_continue_in_a_group(world: World) -> None:
    chat_id = await _group(world, 1)
    count = len(await _messages(world, chat_id))
    world.server.script(Reply(text="A quiet line."))
    out = await world.chats.group_turn(
        chat_id, "quiet", quiet_prompt="Describe {{char}}.", member="Cara"
    )
    assert [r.name for r in out.replies] == ["Cara"] and out.text == "A quiet line."
    quiet = _sent(world, 0)
    assert quiet[-2:] == [
        {"role": "system", "content": "[Write the next reply only as Cara.]"},
        {"role": "system", "content": "Describe Cara."},
    ]
    world.server.script(Reply(text="I say..."))
    out = await world.chats.group_turn(chat_id, "impersonate", rng=lambda: 0.5)
    assert [r.name for r in out.replies] == ["Bob"] and out.text == "I say..."
    assert not any("Write the next reply" in str(m["content"]) for m in _sent(world, 1))
    assert len(await _messages(world, chat_id)) == count  # neither stored anything
    world.server.script(Reply(text=" And more."))
    out = await world.chats.group_turn(chat_id, "continue")
    assert [r.name for r in out.replies] == ["Cara"]  # the last speaker
    assert (await _messages(world, chat_id))[-1].mes.endswith("And more.")


async def test_join_mode_carries_every_members_card(world: World) -> None:
    chat_id = await _group(
        world, 1, generation_mode=1, generation_mode_join_prefix="[<FIELDNAME> of {{char}}] "
    )
    world.server.script(Reply(text="ok"))
    await world.chats.trigger(chat_id, "Cara")
    description = _sent(world, 0)[1]["content"]
    assert description == (
        "[Description of Alice] Alice is a knight travelling with Alice, Bob, Cara.\n"
        "[Description of Bob] Bob is a merchant. Others: Alice, Cara.\n"
        "[Description of Cara] Cara is a mage."
    )


async def test_group_verbs_name_what_is_wrong(world: World) -> None:
    chat_id = await _group(world, 1)
    with pytest.raises(NotFound, match=r"no member 'Zed' \(members: Alice, Bob, Cara\)"):
        await world.chats.trigger(chat_id, "Zed")
    solo = await world.chats.new_chat("Mira")
    with pytest.raises(NotFound, match="belongs to no group"):
        await world.chats.group_turn(solo.id, text="hi")
    assert len(await _messages(world, solo.id)) == 1  # nothing stored
    with pytest.raises(NotFound):
        await world.chats.new_group_chat("No such group")


async def test_generate_quiet_prompt_takes_the_forced_members_view(world: World) -> None:
    chat_id = await _group(world, 1)
    count = len(await _messages(world, chat_id))
    context = world.tk.context(chat_id)
    world.server.script(Reply(text="Bob's quiet line."))
    text = await context.generate_quiet_prompt("Speak as {{char}}.", force_ch_id=1)
    assert text == "Bob's quiet line."
    sent = _sent(world, 0)
    assert sent[1]["content"] == "Bob is a merchant. Others: Alice, Cara."
    assert sent[-2:] == [
        {"role": "system", "content": "[Write the next reply only as Bob.]"},
        {"role": "system", "content": "Speak as Bob."},
    ]
    # By name; and without force, the last speaker (Cara greeted last).
    world.server.script(Reply(text="ok"))
    await context.generate_quiet_prompt("As {{char}}.", force_ch_id="alice")
    assert _sent(world, 1)[-1]["content"] == "As Alice."
    await context.generate_quiet_prompt("As {{char}}.", quiet_to_loud=True)
    assert _sent(world, 2)[-1]["content"] == "As Cara."
    assert len(await _messages(world, chat_id)) == count  # quiet_to_loud does nothing here
    with pytest.raises(GenerateTaskError, match="not a member index") as info:
        await context.generate_quiet_prompt("x", force_ch_id=5)
    assert info.value.details["field"] == "force_ch_id"


async def test_swipe_gives_the_last_speaker_a_new_alternative(world: World) -> None:
    chat_id = await _group(world, 1)
    world.server.script(Reply(text="Cara's other take."))
    out = await world.chats.group_turn(chat_id, "swipe")
    assert [r.name for r in out.replies] == ["Cara"]
    last = (await _messages(world, chat_id))[-1]
    assert (last.name, last.mes, last.swipe_id) == ("Cara", "Cara's other take.", 1)
    assert _sent(world, 0)[-1] == {
        "role": "system",
        "content": "[Write the next reply only as Cara.]",
    }
    # the swiped greeting itself is not in the prompt
    assert not any("I am Cara." in str(m["content"]) for m in _sent(world, 0))


async def test_an_auto_mode_tick_lets_the_manual_group_talk_on(world: World) -> None:
    chat_id = await _group(world, 2)
    world.server.script(Reply(text="Meanwhile..."))
    out = await world.chats.group_turn(chat_id, auto=True, rng=Mulberry32(20261201))
    assert [r.name for r in out.replies] == ["Bob"] and not out.user_message_stored
    with pytest.raises(Conflict, match="takes no user message"):
        await world.chats.group_turn(chat_id, text="hi", auto=True)


async def test_a_prepared_member_turn_names_the_group_for_the_provider(world: World) -> None:
    chat_id = await _group(world, 1)
    loaded = await load_group(world.tk.store, "Camp", owner=world.tk.owner)
    speaker = speaker_for(loaded, loaded.member("Bob"))
    draft = TurnDraft(
        chat_id,
        "normal",
        TurnOverrides(),
        character=speaker.character_id,
        group=speaker.context,
    )
    prepared = await prepare_turn(TurnDeps(world.tk.store, world.tk.owner), draft)
    assert prepared.char_name == "Bob"
    assert prepared.names.group_names == ("Alice", "Bob", "Cara")
    assert speaker.others == ("Alice", "Cara")


async def test_solo_verbs_refuse_a_group_chat(world: World) -> None:
    chat_id = await _group(world, 1)
    with pytest.raises(Conflict, match=r"group 'Camp'.*use group_turn"):
        await world.chats.send(chat_id, "hello")
    with pytest.raises(Conflict):
        await world.chats.regenerate(chat_id)
    assert len(await _messages(world, chat_id)) == 3  # the greetings only
    assert world.server.requests == []


async def test_preview_shows_a_members_turn_without_sending(world: World) -> None:
    chat_id = await _group(world, 0, disabled_members=["Alice.png"])
    prepared = await world.chats.preview(chat_id)
    assert prepared.char_name == "Bob"  # the first unmuted member
    prepared = await world.chats.preview(chat_id, member="Cara")
    assert prepared.char_name == "Cara"
    assert prepared.prompt.messages[-1] == {
        "role": "system",
        "content": "[Write the next reply only as Cara.]",
    }
    assert world.server.requests == []
    solo = await world.chats.new_chat("Mira")
    with pytest.raises(NotFound, match="not a group chat"):
        await world.chats.preview(solo.id, member="Cara")


async def test_renderer_providers_reach_each_members_joined_fields(world: World) -> None:
    for card in CARDS:
        card["data"]["personality"] = "{{mood_of}} as {{char}}"
    try:
        world.tk.prompt_renderer.register_function_provider(
            "mood_of", lambda args, variables, configurable: "calm"
        )
        chat_id = await _group(world, 1, generation_mode=1)
        world.server.script(Reply(text="ok"))
        await world.chats.trigger(chat_id, "Bob")
        personality = _sent(world, 0)[2]["content"]
        assert personality == "calm as Alice\ncalm as Bob\ncalm as Cara"
    finally:
        for card in CARDS:
            card["data"]["personality"] = ""


async def test_regenerate_after_the_greetings_replaces_the_last_greeting_only(
    world: World,
) -> None:
    chat_id = await _group(world, 2)
    greetings = await _messages(world, chat_id)
    assert len({m.extra.gen_id for m in greetings}) == 3  # a batch each
    world.server.script(Reply(text="Again."))
    out = await world.chats.group_turn(chat_id, "regenerate", rng=Mulberry32(20261201))
    assert [r.name for r in out.replies] == ["Bob"]
    after = await _messages(world, chat_id)
    assert [m.mes for m in after] == [greetings[0].mes, greetings[1].mes, "Again."]


def test_a_members_greeting_is_one_of_its_non_empty_greetings() -> None:
    card = Character(name="Ivy", first_mes="", alternate_greetings=["Hi.", "", "Yo."])
    member = GroupMember("Ivy.png", card)
    assert pick_greeting(member, lambda: 0.6) == "Yo."
    assert pick_greeting(member, lambda: 0.0) == "Hi."
    assert pick_greeting(GroupMember("Z.png", Character(name="Z")), lambda: 0.0) is None


async def test_a_long_members_only_stretch_is_read_back_to_the_user_not_whole(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat_id = await _group(world, 3)
    world.server.script(Reply(text="First."))
    await world.chats.group_turn(chat_id, text="Who goes?", rng=lambda: 0.0)  # Alice
    for i in range(200):  # the members talk among themselves, past the first window
        name = ("Alice", "Bob")[i % 2]
        message = Message.new(name, f"talk {i}", is_user=False)
        message.original_avatar = f"{name}.png"  # who spoke, as SillyTavern marks a member
        await world.tk.store.append_message(chat_id, message)
    reads = ChatReads(monkeypatch, world.tk.store)
    world.server.script(Reply(text="At last."))
    out = await world.chats.group_turn(chat_id, rng=lambda: 0.0)
    # pooled: only Cara has not spoken since the user, 201 messages back
    assert [r.name for r in out.replies] == ["Cara"]
    assert reads.whole == []
