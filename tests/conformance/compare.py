"""How a case's recorded output is compared with ours.

SillyTavern's values are JavaScript values serialized as JSON, so equality is JSON equality:
``1`` and ``1.0`` are the same number (JS has one number type), but ``true`` is not ``1`` and
``"3"`` is not ``3`` (the macro variables' string/number types are part of the oracle). Object
key order is not compared (``request_body`` was stored parsed; order carries no meaning on the
wire); list order is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .adapters import MacroOutcome, PromptOutcome, WorldInfoTurn

_SNIPPET = 60


def json_mismatch(actual: Any, expected: Any, path: str = "$") -> str | None:
    """The first difference between two JSON values, as ``path: what``; None when equal."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        if type(actual) is not type(expected) or actual != expected:
            return f"{path}: expected {expected!r}, got {actual!r}"
        return None
    if _is_number(expected):
        if not _is_number(actual) or actual != expected:
            return f"{path}: expected {expected!r}, got {actual!r}"
        return None
    if isinstance(expected, str):
        if not isinstance(actual, str):
            return f"{path}: expected a string {_clip(expected)!r}, got {actual!r}"
        return None if actual == expected else f"{path}: {string_difference(actual, expected)}"
    if expected is None:
        return None if actual is None else f"{path}: expected null, got {_clip(repr(actual))}"
    if isinstance(expected, Mapping):
        return _mapping_mismatch(actual, expected, path)
    if isinstance(expected, Sequence):
        return _sequence_mismatch(actual, expected, path)
    raise TypeError(f"{path}: not a JSON value: {type(expected).__name__}")


def assert_json_equal(actual: Any, expected: Any, what: str) -> None:
    mismatch = json_mismatch(actual, expected)
    if mismatch is not None:
        raise AssertionError(f"{what} differs from SillyTavern's: {mismatch}")


def string_difference(actual: str, expected: str) -> str:
    """Where two long strings part ways, with a little context (prompts run to 100 KB)."""
    index = next(
        (i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b),
        min(len(actual), len(expected)),
    )
    start = max(0, index - _SNIPPET)
    return (
        f"strings differ at index {index} (lengths {len(actual)} vs {len(expected)}); "
        f"expected ...{expected[start : index + _SNIPPET]!r}..., "
        f"got ...{actual[start : index + _SNIPPET]!r}..."
    )


_RANDOM_MARKER = re.compile(r"«([RD]\d+):[^»]*»")


def mask_random_markers(text: str) -> str:
    """Blank the values of ``«Rnn:…»`` ({{random}}) and ``«Dnn:…»`` ({{roll}}) markers.

    The perf README: those two draw from unseeded generators in SillyTavern, so only the text
    outside them is an oracle. ``«Pnn:…»`` ({{pick}}) is seeded and stays compared.
    """
    return _RANDOM_MARKER.sub(lambda match: f"«{match.group(1)}:*»", text)


def is_wall_clock_case(case: Mapping[str, Any]) -> bool:
    """A macro case whose output depends on a clock nobody recorded (e2e_026/e2e_027).

    README: such cases carry no ``time_dependent`` flag, and their test file asserts only that
    the output differs from the input. Recognized by shape, not by id, so kept-aside cases of
    the same kind are handled too: expectations exist and none of them pins the output.
    """
    if case.get("time_dependent"):
        return False
    expectations = case.get("test_expectations") or []
    return bool(expectations) and all(e.get("matcher") != "toBe" for e in expectations)


def check_expectations(output: str, expectations: Sequence[Mapping[str, Any]]) -> None:
    """Apply the e2e test file's own ``expect()`` matchers to our output."""
    for expectation in expectations:
        matcher, expected = expectation.get("matcher"), expectation.get("expected")
        if matcher == "toBe":
            ok = output == expected
        elif matcher == "not.toBe":
            ok = output != expected
        elif matcher == "toContain":
            ok = isinstance(expected, str) and expected in output
        elif matcher == "not.toContain":
            ok = isinstance(expected, str) and expected not in output
        else:
            raise AssertionError(f"unsupported test matcher {matcher!r} in the case file")
        assert ok, f"expect(output).{matcher}({expected!r}) failed; output was {output!r}"


# --- per family ------------------------------------------------------------------------------


def check_macro_outcome(outcome: MacroOutcome, case: Mapping[str, Any]) -> None:
    """Output exactly (or the test file's matchers for wall-clock cases), then both scopes."""
    if is_wall_clock_case(case):
        check_expectations(outcome.output, case["test_expectations"])
    else:
        assert outcome.output == case["output"]
    assert_json_equal(outcome.local_vars, case["local_vars_after"], "local variables")
    assert_json_equal(outcome.global_vars, case["global_vars_after"], "global variables")


def check_worldinfo_turns(turns: Sequence[WorldInfoTurn], scenario: Mapping[str, Any]) -> None:
    """Each turn's result and timed state, and that it drew as many rolls as ST did."""
    recorded_turns = scenario["turns"]
    assert len(turns) == len(recorded_turns), "the adapter must run every recorded turn"
    for index, (got, want) in enumerate(zip(turns, recorded_turns, strict=True)):
        where = f"turn {index}"
        if got.scan_chat_length is not None:
            assert got.scan_chat_length == want.get("wi_chat_length", got.scan_chat_length), (
                f"{where}: world info saw {got.scan_chat_length} messages, "
                f"SillyTavern {want.get('wi_chat_length')}"
            )
        assert_json_equal(got.result, want["result"], f"{where} result")
        assert_json_equal(got.timed_state_after, want["timed_state_after"], f"{where} timed state")
        recorded = len(want["random_consumed"])
        assert got.random_used == recorded, (
            f"{where}: the engine drew {got.random_used} random values, SillyTavern {recorded}"
        )


def expected_prompt_part(case: Mapping[str, Any]) -> PromptOutcome:
    """The prompt engine's share of ``request_body``: messages, or prompt and stop strings."""
    body = case["request_body"]
    if case["api"] == "cc":
        return PromptOutcome(messages=body["messages"])
    if case["api"] == "tc":
        stop = body.get("stop", body.get("stopping_strings"))
        return PromptOutcome(prompt=body["prompt"], stop=stop)
    return PromptOutcome(prompt=body["prompt"])


def check_prompt_outcome(got: PromptOutcome, case: Mapping[str, Any]) -> None:
    want = expected_prompt_part(case)
    if want.messages is not None:
        assert_json_equal(got.messages, want.messages, "messages")
        return
    assert got.prompt == want.prompt
    if want.stop is not None:
        assert_json_equal(got.stop, want.stop, "stop strings")


def check_perf_macro(
    output: str | Mapping[str, str], outcome: MacroOutcome, recorded: Mapping[str, Any]
) -> None:
    """A benchmark set's output (random/roll markers masked) and variables afterwards."""
    assert_json_equal(_masked(output), _masked(recorded["output"]), "output")
    assert_json_equal(outcome.local_vars, recorded["vars_after"]["local"], "local variables")
    assert_json_equal(outcome.global_vars, recorded["vars_after"]["global"], "global variables")


def _masked(value: str | Mapping[str, str]) -> str | dict[str, str]:
    if isinstance(value, str):
        return mask_random_markers(value)
    return {key: mask_random_markers(text) for key, text in value.items()}


def _mapping_mismatch(actual: Any, expected: Mapping[str, Any], path: str) -> str | None:
    if not isinstance(actual, Mapping):
        return f"{path}: expected an object, got {_clip(repr(actual))}"
    missing = [key for key in expected if key not in actual]
    if missing:
        return f"{path}: missing keys {missing}"
    extra = [key for key in actual if key not in expected]
    if extra:
        return f"{path}: unexpected keys {extra}"
    for key, value in expected.items():
        found = json_mismatch(actual[key], value, f"{path}.{key}")
        if found is not None:
            return found
    return None


def _sequence_mismatch(actual: Any, expected: Sequence[Any], path: str) -> str | None:
    if isinstance(actual, str | bytes | Mapping) or not isinstance(actual, Sequence):
        return f"{path}: expected a list, got {_clip(repr(actual))}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=False)):
        found = json_mismatch(got, want, f"{path}[{index}]")
        if found is not None:
            return found
    if len(actual) != len(expected):
        return f"{path}: expected {len(expected)} items, got {len(actual)}"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
