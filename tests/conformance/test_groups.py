"""Group-chat cases (``st-1.18/groups/*.json``, README §5).

Per case: the speakers the group wrapper drafts (mulberry32 replay of the recorded seed) and,
for each request of the turn, the prompt engine's part of the body (chat messages, or the
prompt string and stop strings), compared like the prompt cases.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import adapters, cases, compare

ROOT = cases.configured_root()
CASES = cases.discover_groups(ROOT.path)
PARAMS = cases.params(CASES, ROOT, "group")


def _requests(case: cases.Case) -> tuple[dict[str, Any], list[adapters.GroupRequestOutcome]]:
    data = case.load()
    try:
        return data, adapters.build_group_requests(data)
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("case", PARAMS)
def test_group_speakers(case: cases.Case) -> None:
    data, got = _requests(case)
    assert [r.drafted for r in got] == [m["name"] for m in data["drafted_member"]]


@pytest.mark.parametrize("case", PARAMS)
def test_group_prompts(case: cases.Case) -> None:
    data, got = _requests(case)
    recorded = data["requests"]
    assert len(got) == len(recorded), "number of requests in the turn"
    for index, (ours, theirs) in enumerate(zip(got, recorded, strict=True)):
        assert ours.drafted == theirs["drafted_member"]["name"], f"request {index}: speaker"
        compare.check_prompt_outcome(
            ours.prompt, {"api": data["api"], "request_body": theirs["request_body"]}
        )
