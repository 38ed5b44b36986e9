"""SillyTavern 1.18's recorded macro cases (``st-1.18/macros.jsonl``), each its own test.

How cases that SillyTavern could not pin are compared:

- ``time_dependent`` cases: the clock is pinned to the recorded page time (``page_time_before``,
  and ``page_time_after`` as the second candidate) in the recorded time zone
  (``page_tz_offset_min`` is JavaScript's ``getTimezoneOffset``); the output must equal
  SillyTavern's for one of the two instants.
- wall-clock cases without a recorded time (``e2e_026``/``e2e_027``, recognised by having only
  non-``toBe`` expectations): the test file's own matchers, plus the ``h:mm AM`` shape.
- ``{{random}}``/``{{roll}}`` cases in the file are deterministic (one option, ``1d1`` dice),
  so they are compared exactly; ``{{pick}}`` is seeded and always compared exactly.

Skips when the conformance folder is absent (``TAVERNKIT_CONFORMANCE_DIR``, default
``../shared/conformance`` beside the repo).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tavernkit.text.macros import MacroEnv, render_macros
from tavernkit.text.variables import InMemoryVariables

REPO = Path(__file__).resolve().parents[2]


def _conformance_root() -> Path:
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance"


def _load_cases() -> list[dict[str, Any]]:
    path = _conformance_root() / "st-1.18" / "macros.jsonl"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


CASES = _load_cases()


def run_case(case: dict[str, Any], now: datetime | None = None) -> tuple[str, dict, dict]:
    names = (case.get("env_seen") or {}).get("names") or {"user": "User", "char": "Character"}
    metadata = case.get("chat_metadata_set") or {}
    extra = case.get("env_extra") or {}
    tz = timezone(timedelta(minutes=-int(case.get("page_tz_offset_min") or 0)))
    variables = InMemoryVariables(case["local_vars_before"], case["global_vars_before"])
    env = MacroEnv(
        user=names.get("user", "User"),
        char=names.get("char", "Character"),
        group=names.get("group"),
        group_not_muted=names.get("groupNotMuted"),
        not_char=names.get("notChar"),
        original=extra.get("original"),
        chat_id_hash=metadata.get("chat_id_hash"),
        variables=variables,
        compat="st-1.18",
        tz=tz,
    )
    if now is not None:
        env.clock = lambda: now
    result = render_macros(case["input"], env)
    return result.text, variables.local_vars, variables.global_vars


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _is_wall_clock(case: dict[str, Any]) -> bool:
    expectations = case.get("test_expectations") or []
    return (
        not case.get("time_dependent")
        and bool(expectations)
        and all(e.get("matcher") != "toBe" for e in expectations)
    )


@pytest.mark.skipif(not CASES, reason="conformance macros.jsonl not found")
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_golden(case: dict[str, Any]) -> None:
    if case.get("time_dependent"):
        outputs = set()
        for key in ("page_time_before", "page_time_after"):
            if case.get(key):
                outputs.add(run_case(case, _instant(case[key]))[0])
        assert case["output"] in outputs
        return
    output, local_vars, global_vars = run_case(case)
    if _is_wall_clock(case):
        for expectation in case["test_expectations"]:
            if expectation["matcher"] == "not.toBe":
                assert output != expectation["expected"]
        assert re.search(r"\d{1,2}:\d\d [AP]M", output), output
        return
    assert output == case["output"]
    assert local_vars == case["local_vars_after"]
    assert global_vars == case["global_vars_after"]
    for key, value in case["local_vars_after"].items():
        assert type(local_vars[key]) is type(value) or (
            isinstance(value, int | float) and isinstance(local_vars[key], int | float)
        ), key
