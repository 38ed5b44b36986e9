"""World-info scenarios (``st-1.18/worldinfo/*.json``): every turn, in order, on one state."""

from __future__ import annotations

import pytest

from . import adapters, cases, compare

ROOT = cases.configured_root()
CASES = cases.discover_worldinfo(ROOT.path)


@pytest.mark.parametrize("case", cases.params(CASES, ROOT, "worldinfo"))
def test_worldinfo(case: cases.Case) -> None:
    scenario = case.load()
    try:
        turns = adapters.run_worldinfo_scenario(scenario)
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))
    compare.check_worldinfo_turns(turns, scenario)
