"""``scan(..., explain=True)``: the recorded reason for each entry, on small books."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.worldinfo import Book, EntryReason, WorldInfoEngine, scan
from tavernkit.worldinfo import replay as replay_module
from tavernkit.worldinfo.replay import ScenarioReplay

from ._macros import mini_substitute
from ._paths import worldinfo_goldens

ENGINE = WorldInfoEngine(regex_timeout_s=0.5)


def entry(uid: int, keys: list[str], content: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": uid,
        "key": keys,
        "keysecondary": [],
        "content": content,
        "comment": f"e{uid}",
        "constant": False,
        "selective": True,
        "selectiveLogic": 0,
        "order": 100 - uid,
        "position": 0,
        "disable": False,
        "probability": 100,
        "useProbability": True,
        "group": "",
    }
    base.update(extra)
    return base


def explain(
    entries: list[dict[str, Any]], chat: list[str], **kw: Any
) -> tuple[Any, dict[int, EntryReason]]:
    kw.setdefault("max_context", 8000)
    kw.setdefault("rng", random.Random(1).random)
    data = {"entries": {str(e["uid"]): e for e in entries}}
    result = scan([Book("w", data)], chat, engine=ENGINE, explain=True, **kw)
    assert result.explain is not None
    return result, {r.uid: r for r in result.explain}


def test_explain_is_off_by_default() -> None:
    data = {"entries": {"0": entry(0, ["dragon"], "Dragons breathe fire.")}}
    result = scan([Book("w", data)], ["a dragon"], max_context=8000, engine=ENGINE)
    assert result.explain is None
    assert result.activated_keys == ["w.0"]


def test_plain_key_records_the_key_that_matched() -> None:
    result, why = explain(
        [entry(0, ["wyvern", "dragon"], "Dragons breathe fire."), entry(1, ["elf"], "x")],
        ["I saw a dragon"],
    )
    r = why[0]
    assert r.fired and r.reason == "key"
    assert r.primary_key == "dragon" and not r.primary_regex
    assert r.logic is None and r.secondary_keys == ()
    assert r.loop == 0 and not r.min_activations
    assert r.key == "w.0" and r.comment == "e0"
    assert "'dragon'" in r.detail
    assert not why[1].fired and why[1].reason == "no_match"
    # the record agrees with the scan: fired == activated
    assert [r.key for r in result.explain.fired] == result.activated_keys


def test_regex_key_is_flagged() -> None:
    _, why = explain([entry(0, ["/drag(on|oon)s?/i", "castle"], "x")], ["The DRAGOONS came"])
    assert why[0].fired and why[0].primary_key == "/drag(on|oon)s?/i"
    assert why[0].primary_regex
    assert "(regex)" in why[0].detail


def test_secondary_and_any_names_the_secondary_that_matched() -> None:
    e = entry(0, ["sword"], "x", keysecondary=["shield", "armor"], selectiveLogic=0)
    _, why = explain([e], ["a sword and armor"])
    r = why[0]
    assert r.fired and r.logic == "AND_ANY" and r.secondary_keys == ("armor",)
    _, why = explain([e], ["a sword alone"])
    assert not why[0].fired and why[0].reason == "secondary"
    assert why[0].primary_key == "sword" and "AND_ANY failed" in why[0].detail


def test_secondary_not_all_names_the_absent_key() -> None:
    e = entry(0, ["sword"], "x", keysecondary=["shield", "armor"], selectiveLogic=1)
    _, why = explain([e], ["a sword, a shield"])
    r = why[0]
    assert r.fired and r.logic == "NOT_ALL" and r.secondary_keys == ("armor",)
    assert "absent 'armor'" in r.detail
    _, why = explain([e], ["sword shield armor"])
    assert not why[0].fired and why[0].reason == "secondary"


def test_selective_off_needs_no_secondary() -> None:
    e = entry(0, ["sword"], "x", keysecondary=["shield"], selective=False)
    _, why = explain([e], ["a sword"])
    assert why[0].fired and why[0].logic is None


def test_constant_disabled_and_forced() -> None:
    _, why = explain(
        [
            entry(0, [], "always", constant=True),
            entry(1, ["dragon"], "off", disable=True),
            entry(2, ["nothing-here"], "forced"),
        ],
        ["a dragon"],
        force_activate=["w.2"],
    )
    assert (why[0].fired, why[0].reason) == (True, "constant")
    assert (why[1].fired, why[1].reason) == (False, "disabled")
    assert (why[2].fired, why[2].reason) == (True, "forced")


def test_decorator_activate() -> None:
    _, why = explain([entry(0, ["nope"], "@@activate\nbody")], ["hello"])
    assert why[0].fired and why[0].reason == "decorator"


def test_recursion_level_one() -> None:
    _, why = explain(
        [
            entry(0, ["dragon"], "Dragons guard the castle."),
            entry(1, ["castle"], "The castle has a moat."),
            entry(2, ["moat"], "The moat is deep."),
        ],
        ["a dragon"],
    )
    assert why[0].loop == 0
    assert why[1].fired and why[1].loop == 1 and why[1].primary_key == "castle"
    assert why[2].fired and why[2].loop == 2


def test_trigger_filter() -> None:
    _, why = explain([entry(0, ["dragon"], "x", triggers=["continue"])], ["a dragon"])
    assert not why[0].fired and why[0].reason == "trigger"


def test_character_filter() -> None:
    e = entry(0, ["dragon"], "x", characterFilter={"names": ["Bob"], "isExclude": False})
    _, why = explain([e], ["a dragon"], character_filename="Alice")
    assert not why[0].fired and why[0].reason == "character_filter"


def test_probability_fail_with_fixed_rng() -> None:
    e = entry(0, ["dragon"], "x", probability=30)
    _, why = explain([e], ["a dragon"], rng=lambda: 0.9)
    r = why[0]
    assert not r.fired and r.reason == "probability"
    assert r.roll == pytest.approx(90.0) and r.probability == 30
    assert r.primary_key == "dragon"  # it had matched
    _, why = explain([e], ["a dragon"], rng=lambda: 0.1)
    assert why[0].fired


def test_group_loser_names_the_winner() -> None:
    _, why = explain(
        [
            entry(0, ["dragon"], "a", group="beasts", groupOverride=True),
            entry(1, ["dragon"], "b", group="beasts"),
        ],
        ["a dragon"],
    )
    assert why[0].fired
    r = why[1]
    assert not r.fired and r.reason == "group"
    assert r.group == "beasts" and r.group_winner == "w.0"
    assert "e0" in r.detail


def test_group_weighted_roll_loser() -> None:
    rolls: Iterator[float] = iter([0.0, 0.0, 0.0])
    _, why = explain(
        [entry(0, ["dragon"], "a", group="g"), entry(1, ["dragon"], "b", group="g")],
        ["a dragon"],
        rng=lambda: next(rolls),
    )
    assert why[0].fired
    assert why[1].reason == "group" and why[1].group_winner == "w.0"


def test_budget_overflow() -> None:
    long = "word " * 200
    _, why = explain(
        [entry(0, ["dragon"], long), entry(1, ["dragon"], long), entry(2, ["dragon"], long)],
        ["a dragon"],
        max_context=1000,
        settings={"budget": 40},
    )
    assert why[0].fired
    assert why[1].reason == "budget" and not why[1].fired
    assert "budget" in why[1].detail
    assert why[2].reason == "budget_skipped"


def test_cooldown_from_timed_state() -> None:
    e = entry(0, ["dragon"], "x", cooldown=3)
    first = scan(
        [Book("w", {"entries": {"0": e}})],
        ["a dragon"],
        max_context=8000,
        engine=ENGINE,
    )
    assert first.activated_keys == ["w.0"]
    _, why = explain([e], ["a dragon", "b", "c"], timed_state=first.timed_state)
    assert not why[0].fired and why[0].reason == "cooldown"


def test_min_activations_widening_is_recorded() -> None:
    chat = ["nothing", "nothing", "nothing", "an old dragon"]
    _, why = explain(
        [entry(0, ["dragon"], "x")],
        chat,
        settings={"depth": 1, "min_activations": 1},
    )
    assert why[0].fired and why[0].min_activations


def test_every_entry_is_explained_and_to_json() -> None:
    result, why = explain(
        [entry(0, ["dragon"], "x"), entry(1, ["elf"], "y"), entry(2, [], "z")], ["dragon"]
    )
    assert result.explain is not None
    assert len(result.explain) == 3
    rows = result.explain.to_json()
    assert {row["key"] for row in rows} == {"w.0", "w.1", "w.2"}
    assert rows[0]["primary_key"] == "dragon"
    assert result.explain.get("w.1") is why[1]


_WORDS = ["dragon", "elf", "castle", "moat", "sword", "shield"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(_WORDS), min_size=0, max_size=2),
            st.lists(st.sampled_from(_WORDS), max_size=2),
            st.sampled_from([0, 1, 2, 3]),
            st.sampled_from(["", "g", "h"]),
            st.sampled_from([100, 50]),
            st.sampled_from([*_WORDS, "plain text"]),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.sampled_from([*_WORDS, "and", "the"]), max_size=6),
    st.integers(0, 1000),
)
def test_explain_never_changes_the_scan_and_agrees_with_it(
    specs: list[tuple[list[str], list[str], int, str, int, str]], words: list[str], seed: int
) -> None:
    entries = [
        entry(
            i, keys, content, keysecondary=sec, selectiveLogic=logic, group=group, probability=prob
        )
        for i, (keys, sec, logic, group, prob, content) in enumerate(specs)
    ]
    data = {"entries": {str(e["uid"]): e for e in entries}}
    chat = [" ".join(words)]
    plain = scan(
        [Book("w", data)], chat, max_context=300, rng=random.Random(seed).random, engine=ENGINE
    )
    explained = scan(
        [Book("w", data)],
        chat,
        max_context=300,
        rng=random.Random(seed).random,
        engine=ENGINE,
        explain=True,
    )
    assert explained == plain
    assert explained.explain is not None
    assert [r.key for r in explained.explain if r.fired] == sorted(
        plain.activated_keys, key=[r.key for r in explained.explain].index
    )
    assert len(explained.explain) == len(entries)


# --- the goldens: explaining changes nothing, and fired == activated ---------------------------

GOLDENS = [p for p in worldinfo_goldens() if not p.stem.startswith("large_")]


@pytest.mark.skipif(not GOLDENS, reason="no world-info goldens in the conformance folder")
def test_goldens_with_explain_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_module, "scan", functools.partial(scan, explain=True))
    counted = 0
    for path in GOLDENS:
        scenario = json.loads(path.read_text(encoding="utf-8"))
        if (scenario.get("tokenizer") or {}).get("main_api") == "openai":
            continue  # needs a tiktoken counter; test_wi_goldens covers it
        character = scenario.get("character") or {}
        persona = scenario.get("persona") or {}
        replay = ScenarioReplay(
            scenario,
            substitute=mini_substitute(character.get("name", ""), persona.get("name", "User")),
            engine=ENGINE,
        )
        for n, turn in enumerate(scenario["turns"]):
            outcome = replay.run_turn(turn, iter(turn["random_consumed"]).__next__)
            assert outcome.st_result == turn["result"], f"{path.stem} turn {n}"
            explained = outcome.result.explain
            assert explained is not None
            fired = {r.key for r in explained if r.fired}
            assert fired == set(outcome.result.activated_keys), f"{path.stem} turn {n}"
            counted += 1
    assert counted > 0


def test_inspector_lorebook_rows_carry_the_reason() -> None:
    from types import SimpleNamespace

    from tavernkit.chat.inspect import _why

    data = {"entries": {"0": entry(0, ["wyvern", "dragon"], "x")}}
    for flag, why in ((True, "key 'dragon' matched"), (False, "keys: wyvern, dragon")):
        result = scan([Book("w", data)], ["a dragon"], max_context=8000, explain=flag)
        rows = _why(SimpleNamespace(wi=result))  # type: ignore[arg-type]
        assert rows["w.0"]["why"] == why
        assert rows["w.0"].get("matched_key") == ("dragon" if flag else None)
