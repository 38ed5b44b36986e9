"""The comparison rules and adapter plumbing of the conformance harness."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import adapters, cases, compare

from .synthetic import macro_case, prompt_case, worldinfo_case

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_a_json_value_equals_its_round_trip(value: Any) -> None:
    assert compare.json_mismatch(json.loads(json.dumps(value)), value) is None


@pytest.mark.parametrize(
    ("actual", "expected", "difference"),
    [
        (1.0, 1, None),  # one number type in JS
        ({"b": 1, "a": 2}, {"a": 2, "b": 1}, None),  # key order carries no meaning
        (True, 1, "expected 1, got True"),
        ("3", 3, "expected 3, got '3'"),
        ([1, 2], [2, 1], "$[0]: expected 2, got 1"),
        ([1], [1, 2], "expected 2 items, got 1"),
        ({"a": 1}, {"a": 1, "b": 2}, "missing keys ['b']"),
        ({"a": 1, "c": 3}, {"a": 1}, "unexpected keys ['c']"),
        ({"m": [{"content": "x"}]}, {"m": [{"content": None}]}, "$.m[0].content: expected null"),
        ("abc", ["a"], "expected a list"),
    ],
)
def test_json_mismatch(actual: Any, expected: Any, difference: str | None) -> None:
    found = compare.json_mismatch(actual, expected)
    if difference is None:
        assert found is None
    else:
        assert found is not None and difference in found


def test_long_strings_report_where_they_part() -> None:
    expected = "a" * 500 + "TAIL"
    found = compare.json_mismatch({"s": "a" * 500 + "tail"}, {"s": expected})
    assert found is not None
    assert found.startswith("$.s: strings differ at index 500 (lengths 504 vs 504)")
    with pytest.raises(AssertionError, match="request body differs from SillyTavern's"):
        compare.assert_json_equal({"s": "b"}, {"s": "a"}, "request body")


def test_random_and_roll_markers_are_masked_but_pick_is_not() -> None:
    text = "«R03:south» «D17:7» «P01:teal»"
    assert compare.mask_random_markers(text) == "«R03:*» «D17:*» «P01:teal»"


def test_wall_clock_cases_fall_back_to_the_test_files_matchers() -> None:
    wall = macro_case(
        "e2e_026",
        input="Time: {{time_UTC+2}}",
        output="Time: 2:47 AM",
        local_vars_after={},
        test_expectations=[{"matcher": "not.toBe", "expected": "Time: {{time_UTC+2}}"}],
    )
    assert compare.is_wall_clock_case(wall)
    assert not compare.is_wall_clock_case(macro_case("plain"))
    pinned = macro_case("t", time_dependent=True, test_expectations=wall["test_expectations"])
    assert not compare.is_wall_clock_case(pinned)
    compare.check_macro_outcome(adapters.MacroOutcome("Time: 9:15 PM", {}, {}), wall)
    with pytest.raises(AssertionError, match=r"not\.toBe"):
        compare.check_macro_outcome(adapters.MacroOutcome("Time: {{time_UTC+2}}", {}, {}), wall)
    with pytest.raises(AssertionError, match="unsupported test matcher"):
        compare.check_expectations("x", [{"matcher": "toMatchSnapshot", "expected": None}])


def test_macro_check_compares_output_and_variable_types() -> None:
    case = macro_case("m")
    compare.check_macro_outcome(adapters.MacroOutcome("User", {"x": "1"}, {}), case)
    with pytest.raises(AssertionError):
        compare.check_macro_outcome(adapters.MacroOutcome("user", {"x": "1"}, {}), case)
    with pytest.raises(AssertionError, match="local variables"):
        compare.check_macro_outcome(adapters.MacroOutcome("User", {"x": 1}, {}), case)


def test_worldinfo_check_covers_result_timed_state_and_rolls() -> None:
    scenario = worldinfo_case("w")
    recorded = scenario["turns"][0]
    good = adapters.WorldInfoTurn(recorded["result"], recorded["timed_state_after"], 1)
    compare.check_worldinfo_turns([good], scenario)
    with pytest.raises(AssertionError, match="drew 0 random values, SillyTavern 1"):
        compare.check_worldinfo_turns(
            [adapters.WorldInfoTurn(good.result, good.timed_state_after, 0)], scenario
        )
    reordered = dict(good.result, activated=[])
    with pytest.raises(AssertionError, match="turn 0 result"):
        compare.check_worldinfo_turns(
            [adapters.WorldInfoTurn(reordered, good.timed_state_after, 1)], scenario
        )
    with pytest.raises(AssertionError, match="every recorded turn"):
        compare.check_worldinfo_turns([], scenario)


def test_prompt_check_takes_the_engines_share_of_the_body() -> None:
    cc, tc = prompt_case("c"), prompt_case("t", api="tc")
    assert compare.expected_prompt_part(cc).messages == [{"role": "system", "content": "Hi"}]
    assert compare.expected_prompt_part(tc) == adapters.PromptOutcome(
        prompt="Hi\nUser:", stop=["\nUser:"]
    )
    compare.check_prompt_outcome(adapters.PromptOutcome(prompt="Hi\nUser:", stop=["\nUser:"]), tc)
    with pytest.raises(AssertionError, match="stop strings"):
        compare.check_prompt_outcome(adapters.PromptOutcome(prompt="Hi\nUser:", stop=[]), tc)


def test_replay_random_returns_the_recorded_rolls_then_refuses() -> None:
    rng = adapters.ReplayRandom([0.5, 0.25])
    assert (rng.random(), rng.random()) == (0.5, 0.25)
    assert rng.used == 2 and rng.remaining == 0
    with pytest.raises(AssertionError, match="drew random value #3, but SillyTavern drew only 2"):
        rng.random()


def test_engine_refs_skip_only_when_the_engine_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(adapters.EngineMissing, match="later"):
        adapters.EngineRef("tavernkit.no_such_engine", "run", "later").load()
    with pytest.raises(adapters.EngineMissing, match=r"json\.no_such_function is missing"):
        adapters.EngineRef("json", "no_such_function", "later").load()
    assert adapters.EngineRef("json", "loads", "later").load() is json.loads
    with pytest.raises(adapters.EngineMissing):
        adapters.EngineRef("json.no_such_submodule.deeper", "x", "later").load()
    (tmp_path / "tk_broken_engine.py").write_text("import tk_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError):  # an engine importing a missing module is a bug
        adapters.EngineRef("tk_broken_engine", "run", "later").load()
    assert isinstance(adapters.EngineRef("json", "loads", "").not_wired("f"), AssertionError)


def test_perf_macro_sets_thread_variables_through_every_string(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def fake(text: str, **kwargs: Any) -> adapters.MacroOutcome:
        local = kwargs["local_vars"]
        seen.append((text, dict(local)))
        local["n"] = local.get("n", 0) + 1
        return adapters.MacroOutcome(text.upper(), local, kwargs["global_vars"])

    monkeypatch.setattr(adapters, "evaluate_macros", fake)
    list_set = {
        "id": "a",
        "kind": "list",
        "items": [{"id": "one", "text": "x"}, {"id": "two", "text": "y"}],
        "local_vars_before": {"n": 0},
        "global_vars_before": {},
    }
    output, outcome = adapters.run_perf_macro_set(list_set)
    assert output == {"one": "X", "two": "Y"}
    assert seen == [("x", {"n": 0}), ("y", {"n": 1})]
    assert outcome.local_vars == {"n": 2}
    assert list_set["local_vars_before"] == {"n": 0}  # the case data is never mutated


def test_recorded_answers_pass_their_own_checks() -> None:
    """Fed SillyTavern's own answers, every real case passes: the checks fit the real schema."""
    root = cases.configured_root()
    if root.absence_reason() is not None:
        pytest.skip(root.absence_reason() or "")
    for case in cases.discover_macros(root.path):
        data = case.load()
        recorded = adapters.MacroOutcome(
            data["output"], copy.deepcopy(data["local_vars_after"]), data["global_vars_after"]
        )
        compare.check_macro_outcome(recorded, data)
    for case in cases.discover_prompts(root.path):
        data = case.load()
        compare.check_prompt_outcome(compare.expected_prompt_part(data), data)
    small = [c for c in cases.discover_worldinfo(root.path) if c.source.stat().st_size < 200_000]
    for case in small:
        data = case.load()
        turns = [
            adapters.WorldInfoTurn(t["result"], t["timed_state_after"], len(t["random_consumed"]))
            for t in data["turns"]
        ]
        compare.check_worldinfo_turns(turns, data)
