"""ChatLuna prompt-renderer goldens (``chatluna/cases.jsonl``, recorded from koishi-plugin-chatluna
1.3.36 and @chatluna/shared-prompt-renderer 1.0.5).

Per case: the rendered text and the reported ``variables`` list in ChatLuna's order (templates
and service scripts), the rendered messages (``renderMessages``), or for a preset file what the
importer read, the rendered messages and names, the formatted user input and the author's note;
where ChatLuna threw, that the render fails (with ChatLuna's message, unless the message is the
JavaScript engine's own wording).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from . import cases
from .chatluna_adapter import discover, engine_message, loopback_server, run_case

ROOT = cases.configured_root()
CASES = discover(ROOT.path)
PARAMS = cases.params(CASES, ROOT, "chatluna")


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with loopback_server() as number:
        yield number


def _load(case: cases.Case) -> dict[str, Any]:
    if case.problem is not None:
        raise cases.MalformedCase(f"{case.where}: {case.problem}")
    assert case.data is not None
    return dict(case.data)


def _check_error(ours: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    assert "error" in ours, f"{where}: ChatLuna threw {expected['error']}, we returned {ours}"
    message = expected["error"]["message"]
    if not engine_message(message):
        assert message in ours["error"]["message"], f"{where}: error message"


def _check_outcome(ours: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    if "error" in expected:
        _check_error(ours, expected, where)
        return
    assert ours == expected, where


@pytest.mark.parametrize("case", PARAMS)
def test_chatluna(case: cases.Case, port: int) -> None:
    data = _load(case)
    ours = asyncio.run(run_case(data, port))
    expected = data["expected"]
    kind = data["kind"]
    if kind in ("template", "messages"):
        _check_outcome(ours, expected, kind)
    elif kind == "service":
        assert len(ours["results"]) == len(expected["results"]), "number of results"
        for index, (mine, theirs) in enumerate(
            zip(ours["results"], expected["results"], strict=True)
        ):
            _check_outcome(mine, theirs, f"operation {index} ({data['ops'][index]['op']})")
    else:
        if "load_error" in expected:
            assert "load_error" in ours, "the importer accepts what ChatLuna's loader rejects"
            return
        loaded = expected["loaded"]
        assert ours["loaded"] == {key: loaded[key] for key in ours["loaded"]}, "imported preset"
        assert ours["messages"] == expected["messages"], "rendered messages"
        assert ours["variables"] == expected["variables"], "reported variables"
        if "format_user_prompt" in expected:
            theirs = expected["format_user_prompt"]
            assert ours["format_user_prompt"] == {
                "text": theirs["text"],
                "variables": theirs["variables"],
            }, "formatted user input"
        if "authors_note" in expected:
            assert ours["authors_note"] == expected["authors_note"], "author's note"
