"""Macro cases (``st-1.18/macros.jsonl``): output and both variable scopes afterwards."""

from __future__ import annotations

import pytest

from . import adapters, cases, compare

ROOT = cases.configured_root()
CASES = cases.discover_macros(ROOT.path)


@pytest.mark.parametrize("case", cases.params(CASES, ROOT, "macro"))
def test_macro(case: cases.Case) -> None:
    data = case.load()
    try:
        outcome = adapters.run_macro_case(data)
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))
    compare.check_macro_outcome(outcome, data)
