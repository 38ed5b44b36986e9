"""Prompt cases (``st-1.18/prompts/*.json``).

Two items per case, because two layers own the request (README "Notes for implementers"):
``test_prompt_build`` checks the prompt engine's part (chat messages, or the prompt string and
stop strings) and ``test_request_body`` the whole body the backend received, samplers included.
"""

from __future__ import annotations

import pytest

from . import adapters, cases, compare

ROOT = cases.configured_root()
CASES = cases.discover_prompts(ROOT.path)
PARAMS = cases.params(CASES, ROOT, "prompt")


@pytest.mark.parametrize("case", PARAMS)
def test_prompt_build(case: cases.Case) -> None:
    data = case.load()
    try:
        got = adapters.build_prompt(data)
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))
    compare.check_prompt_outcome(got, data)


@pytest.mark.parametrize("case", PARAMS)
def test_request_body(case: cases.Case) -> None:
    data = case.load()
    try:
        body = adapters.build_request_body(data)
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))
    compare.assert_json_equal(body, data["request_body"], "request body")
