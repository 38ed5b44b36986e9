"""The benchmark inputs (``st-1.18-perf/``) produce the outputs SillyTavern recorded.

Timing is the benchmarks' business (benchmarks/, never timed assertions here); these items only
make sure the benchmarks measure the right computation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import adapters, cases, compare

ROOT = cases.configured_root()
CASES = cases.discover_perf(ROOT.path)


def recorded_macro_output(case: cases.Case) -> dict[str, Any]:
    """``results.json → macro_engine.outputs[set id]``: output plus ``vars_after``."""
    path = Path(case.extra["results"])
    outputs = cases.read_json_object(path).get("macro_engine", {}).get("outputs", {})
    recorded = outputs.get(case.id.removeprefix("macro-"))
    if not isinstance(recorded, dict) or "output" not in recorded or "vars_after" not in recorded:
        raise cases.MalformedCase(f"{path}: no recorded output with vars_after for {case.id}")
    return recorded


@pytest.mark.parametrize("case", cases.params(CASES, ROOT, "perf"))
def test_perf_output(case: cases.Case) -> None:
    data = case.load()
    if case.extra["kind"] == "macro":
        recorded = recorded_macro_output(case)
        try:
            output, outcome = adapters.run_perf_macro_set(data)
        except adapters.EngineMissing as exc:
            pytest.skip(str(exc))
        compare.check_perf_macro(output, outcome, recorded)
        return
    expected = cases.read_json_object(Path(case.extra["output"])).get("messages")
    if not isinstance(expected, list):
        raise cases.MalformedCase(f"{case.extra['output']}: no 'messages' list")
    try:
        messages = adapters.build_perf_prompt(data)
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))
    compare.assert_json_equal(messages, expected, "messages")
