"""Speaker selection (SillyTavern 1.18's group wrapper): every golden's drafted members and
random-draw count, then the rules the goldens do not reach."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernkit.groups.rng import Mulberry32
from tavernkit.groups.selection import SelectionRequest, extract_words, select_speakers, shuffle
from tavernkit.models.character import Character
from tavernkit.models.chat import Message
from tavernkit.models.group import (
    Group,
    GroupMember,
    find_member,
    resolve_members,
    st_talkativeness,
)

from ._goldens import groups_dir


def _golden_ids() -> list[str]:
    folder = groups_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def test_mulberry32_is_the_recorded_sequence() -> None:
    rng = Mulberry32(20261201)
    got = [round(rng(), 4) for _ in range(6)]
    assert got == [0.2827, 0.2346, 0.1074, 0.7544, 0.4921, 0.1473]
    assert rng.drawn == 6


@pytest.mark.parametrize("case_id", _golden_ids() or ["grp_cc_list"])
def test_each_golden_drafts_the_recorded_members_with_the_recorded_draws(case_id: str) -> None:
    path = groups_dir() / f"{case_id}.json"
    if not path.is_file():
        pytest.skip(f"group goldens not found under {groups_dir()}")
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    inputs = case["inputs"]
    group = Group.model_validate(case["effective_settings"].get("group") or inputs["group"])
    roster = {c["avatar"]: Character.model_validate(c["data"]) for c in inputs["group"]["cards"]}
    members = resolve_members(group, roster)
    generate = inputs["generate"]
    forced = generate.get("force_ch_id_name")
    via = str(generate.get("via") or "")
    if via.startswith("/trigger"):
        forced = via.split()[-1]
    rng = Mulberry32(case["random_seed"])
    request = SelectionRequest(
        group=group,
        members=members,
        chat=[Message.model_validate(m) for m in inputs["chat"]],
        user_input=inputs["user_input"],
        kind=generate["type"],
        force=next((m.avatar for m in members if m.name == forced), None),
    )
    chosen = select_speakers(request, rng)
    assert [m.name for m in chosen] == [d["name"] for d in case["drafted_member"]]
    assert rng.drawn == len(case["random_consumed"])


def _members(*spec: tuple[str, Any]) -> tuple[Group, list[GroupMember]]:
    cards = {}
    for name, talk in spec:
        extensions = {} if talk == "missing" else {"talkativeness": talk}
        cards[f"{name}.png"] = Character(name=name, extensions=extensions)
    group = Group(members=list(cards))
    return group, resolve_members(group, cards)


def _say(name: str, text: str, *, user: bool = False) -> Message:
    message = Message.new(name, text, is_user=user)
    if not user:
        message.original_avatar = f"{name}.png"
    return message


class Fixed:
    """An RNG that returns the given values in order, and counts them."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)
        self.drawn = 0

    def __call__(self) -> float:
        self.drawn += 1
        return self.values.pop(0)


def test_talkativeness_follows_the_group_wrapper() -> None:
    def talk(raw: Any) -> float:
        extensions = {} if raw == "missing" else {"talkativeness": raw}
        return st_talkativeness(Character(name="x", extensions=extensions))

    assert talk("missing") == 0.5  # the card loader's default
    assert talk("chatty") == 0.5  # isNaN: the default
    assert (talk(None), talk(""), talk(False), talk("0")) == (0.0, 0.0, 0.0, 0.0)
    assert (talk("0.25"), talk(1)) == (0.25, 1.0)


def test_mentions_are_ascii_words_and_a_shared_word_picks_the_earlier_member() -> None:
    assert extract_words("Zoë, 李 and O'Neil!") == ["zo", "and", "o", "neil"]
    group, members = _members(("John Smith", 0), ("Jane Smith", 0))
    request = SelectionRequest(group=group, members=members, chat=[], user_input="Smith?")
    assert [m.name for m in select_speakers(request, Fixed(0.9, 0.9, 0.9, 0.9))] == ["John Smith"]


def test_natural_fallback_may_pick_the_banned_last_speaker_when_nobody_is_chatty() -> None:
    group, members = _members(("Dora", 0), ("Ivy", 0))
    chat = [_say("Dora", "hm.")]
    request = SelectionRequest(group=group, members=members, chat=chat)
    rng = Fixed(0.0, 0.0, 0.99, 0.0)  # shuffle x2, Ivy's roll, fallback pick over everyone
    assert [m.name for m in select_speakers(request, rng)] == ["Dora"]
    assert rng.drawn == 4


def test_strategies_that_draft_nobody() -> None:
    group, members = _members(("Alice", 0.5), ("Bob", 0.5))
    manual = group.model_copy(update={"activation_strategy": 2})
    typed = SelectionRequest(group=manual, members=members, chat=[], user_input="hello")
    assert select_speakers(typed, Fixed()) == []
    unknown = group.model_copy(update={"activation_strategy": 7})
    assert select_speakers(SelectionRequest(group=unknown, members=members, chat=[]), Fixed()) == []
    muted = group.model_copy(
        update={"activation_strategy": 1, "disabled_members": ["Alice.png", "Bob.png"]}
    )
    muted_members = resolve_members(muted, {m.avatar: m.character for m in members})
    request = SelectionRequest(group=muted, members=muted_members, chat=[], user_input="hi")
    assert select_speakers(request, Fixed()) == []


def test_special_types_pick_the_last_speaker_or_any_member() -> None:
    group, members = _members(("Alice", 0.5), ("Bob", 0.5), ("Cara", 0.5))
    chat = [_say("Bob", "I trade."), _say("User", "And you?", user=True)]
    # continue after a user message: the last character speaker before it (Bob)
    request = SelectionRequest(group=group, members=members, chat=chat, kind="continue")
    assert [m.name for m in select_speakers(request, Fixed())] == ["Bob"]
    # quiet with no character message at all: the first member, muted or not
    quiet = SelectionRequest(
        group=group, members=members, chat=[_say("U", "x", user=True)], kind="quiet"
    )
    assert [m.name for m in select_speakers(quiet, Fixed(0.7))] == ["Cara"]  # random member
    empty = SelectionRequest(group=group, members=members, chat=[], kind="quiet")
    assert [m.name for m in select_speakers(empty, Fixed())] == ["Alice"]
    # impersonate: one draw over every member
    imp = SelectionRequest(group=group, members=members, chat=chat, kind="impersonate")
    assert [m.name for m in select_speakers(imp, Fixed(0.5))] == ["Bob"]
    # a forced member wins whatever the strategy
    forced = SelectionRequest(group=group, members=members, chat=chat, force="Cara.png")
    assert [m.name for m in select_speakers(forced, Fixed())] == ["Cara"]


def test_list_order_drops_duplicate_members_but_resolution_keeps_them() -> None:
    cards = {"A.png": Character(name="A"), "B.png": Character(name="B")}
    group = Group(members=["A.png", "B.png", "A.png", "gone.png"], activation_strategy=1)
    members = resolve_members(group, cards)
    assert [m.avatar for m in members] == ["A.png", "B.png", "A.png"]
    request = SelectionRequest(group=group, members=members, chat=[])
    assert [m.name for m in select_speakers(request, Fixed())] == ["A", "B"]


def test_shuffle_draws_once_per_item_from_the_end() -> None:
    rng = Fixed(0.0, 0.0, 0.0)
    assert shuffle(["a", "b", "c"], rng) == ["b", "c", "a"]
    assert rng.drawn == 3


def test_find_member_takes_an_index_a_name_or_a_unique_prefix() -> None:
    _, members = _members(("Alice", 0.5), ("Alina", 0.5), ("Bob", 0.5))
    assert find_member(members, "2") is members[2]
    assert find_member(members, "9") is None
    assert find_member(members, "ALICE") is members[0]
    assert find_member(members, "bob.png") is members[2]
    assert find_member(members, "Bo") is members[2]  # unique prefix
    assert find_member(members, "Ali") is None  # two members start so: nobody
    assert find_member(members, "lina") is members[1]  # unique part
    assert find_member(members, " ") is None
