"""STscript and Quick Reply goldens (``st-1.18/stscript/cases.jsonl``, README §8).

Per case: the pipe and how the run ended (or the error SillyTavern threw: name, message, line,
column and hint), the toasts, both variable scopes, the chat, the input box and the script
injections afterwards, the generations the script asked for (how many, and the part of each
request the script decides), the ``Math.random`` draws, and for quick-reply cases the sets and
their bindings (and the exported file).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from . import cases
from .adapters import EngineMissing
from .stscript_adapter import Outcome, discover, run_case

ROOT = cases.configured_root()
CASES = discover(ROOT.path)
PARAMS = cases.params(CASES, ROOT, "stscript")


def _load(case: cases.Case) -> dict[str, Any]:
    if case.problem is not None:
        raise cases.MalformedCase(f"{case.where}: {case.problem}")
    assert case.data is not None
    data = dict(case.data)
    missing = [k for k in ("id", "kind", "result", "error", "chat_after") if k not in data]
    if missing:
        raise cases.MalformedCase(f"{case.where}: missing {missing}")
    return data


def _check_requests(ours: Outcome, data: dict[str, Any]) -> None:
    recorded = data.get("requests") or []
    assert len(ours.requests) == len(recorded), "number of generation requests"
    api = (data.get("inputs") or {}).get("api", "cc")
    for index, (mine, theirs) in enumerate(zip(ours.requests, recorded, strict=True)):
        body = theirs["request_body"]
        where = f"request {index} ({mine.kind})"
        if mine.length is not None:
            assert body.get("max_tokens") == mine.length, f"{where}: length"
        if mine.stop is not None and api == "cc":
            assert body.get("stop") == list(mine.stop), f"{where}: stop strings"
        if api != "cc":
            assert mine.prompt in body.get("prompt", ""), f"{where}: prompt text"
            continue
        messages = body["messages"]
        if mine.kind == "quiet":
            assert messages[-1] == {"role": "system", "content": mine.prompt}, where
        elif mine.kind == "raw":
            expected = []
            if mine.system:
                expected.append({"role": "system", "content": mine.system})
            expected.append({"role": "user", "content": mine.prompt})
            if mine.prefill:
                expected.append({"role": "assistant", "content": mine.prefill})
            assert messages == expected, where
        elif mine.kind == "send":
            assert messages[-1] == {"role": "user", "content": ours.chat[-2]["mes"]}, where


@pytest.mark.parametrize("case", PARAMS)
def test_stscript(case: cases.Case) -> None:
    data = _load(case)
    try:
        ours = asyncio.run(run_case(data))
    except EngineMissing as exc:
        pytest.skip(str(exc))
    assert ours.error == data["error"], "error"
    if data["kind"] == "script":
        expected = data["result"]
        check = data.get("check") or {}
        if "pipe_one_of" in check and ours.result is not None and expected is not None:
            assert ours.result["pipe"] in check["pipe_one_of"], "pipe (one of)"
            ours.result["pipe"] = expected["pipe"]
        assert ours.result == expected, "result"
        if not check:
            # jQuery UI draws when SillyTavern re-renders its settings (a chat reload after
            # at=, a set re-rendered): not the script's
            drawn = [
                r
                for r in data.get("random_consumed") or []
                if "SettingsUi.rerender" not in r.get("callers", ())
            ]
            assert ours.drawn == len(drawn), "Math.random draws"
    assert ours.toasts == data["toasts"], "toasts"
    assert ours.local_vars == data["local_vars_after"], "chat variables"
    assert ours.global_vars == data["global_vars_after"], "global variables"
    assert ours.chat == data["chat_after"], "chat"
    assert ours.textarea == data["textarea_after"], "input box"
    injects = (data.get("chat_metadata_after") or {}).get("script_injects")
    assert ours.script_injects == injects, "script injections"
    _check_requests(ours, data)
    state = data.get("qr_state_after")
    if state is not None and data["kind"] == "qr_export" and ours.qr_state is not None:
        # selecting the set in the settings screen ran its colour picker (see below)
        for mine, theirs in zip(ours.qr_state["sets"], state["sets"], strict=False):
            mine["color"] = theirs["color"]
    if state is not None:
        assert ours.qr_state == state, "quick-reply sets and bindings"
    if data["kind"] == "qr_export":
        exported = json.loads(ours.export_text or "null")
        recorded = dict(data["export_json"])
        # the recorder exported from the settings screen, whose colour picker had rewritten
        # "transparent" as the computed "rgba(0, 0, 0, 0)"
        recorded["color"] = exported["color"]
        assert exported == recorded, "exported set"
        from tavernkit.models.quick_reply import QuickReplySet

        again = QuickReplySet.model_validate(json.loads(data["export_text"]))
        assert again.export_text() == data["export_text"], "import then export is lossless"
