"""Memory goldens (``st-1.18/memory/*.json``): Vector Storage (vectorized world info, chat
memory) and Summarize, replayed with the recorder's mock embeddings.

Per case: every LLM request SillyTavern sent (the user's generations and the summaries, in
order) equals the one tavernkit builds, and what was embedded before the first reply (the
"Vectorize All" index, the lorebook entries, the query texts) equals what SillyTavern's server
asked its embeddings endpoint for.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from . import cases, compare
from .memory_adapter import REPLY, run_memory_case

ROOT = cases.configured_root()
# memory cases carry every key of a prompt case (README §6), so they validate as one
CASES = cases._discover_files(ROOT.path / cases.ST_DIR / "memory", cases.PROMPTS)
PARAMS = cases.params(CASES, ROOT, "memory")


def _queries(data: dict[str, Any]) -> set[str]:
    return {
        r["body"]["searchText"]
        for r in data["vector_api_requests"]
        if r["phase"] == "gen1" and r["url"].startswith("/api/vector/query")
    }


def _expected_documents(data: dict[str, Any]) -> Counter[str]:
    """What SillyTavern embedded as documents before the reply (queries left out: it embeds
    the same query text once per query, tavernkit once per turn)."""
    first = data["inputs"]["user_inputs"][0]
    queries = _queries(data)
    texts: Counter[str] = Counter()
    for request in data["embedding_requests"]:
        if request["phase"] not in ("index", "gen1"):
            continue
        if request["input"] == [first, REPLY]:
            continue  # the sync of the new messages after the reply
        texts.update(t for t in request["input"] if t not in queries)
    return texts


@pytest.mark.parametrize("case", PARAMS)
def test_memory_requests(case: cases.Case) -> None:
    data = dict(case.load())
    run = asyncio.run(run_memory_case(data))
    want = [(r["kind"], r["request_body"]) for r in data["requests"]]
    got = run.generations
    assert [g.kind for g in got] == [kind for kind, _ in want], "requests (generation/summary)"
    for number, (generation, (_, body)) in enumerate(zip(got, want, strict=True)):
        recorded = {"api": data["api"], "request_body": body}
        try:
            compare.check_prompt_outcome(generation.outcome, recorded)
        except AssertionError as exc:
            raise AssertionError(f"request {number} ({generation.kind}): {exc}") from exc


@pytest.mark.parametrize("case", PARAMS)
def test_memory_embeddings(case: cases.Case) -> None:
    data = dict(case.load())
    run = asyncio.run(run_memory_case(data))
    queries = _queries(data)
    ours = Counter(run.embedded_before_reply)
    assert {t for t in ours if t in queries} == queries, "query texts"
    assert Counter({t: n for t, n in ours.items() if t not in queries}) == _expected_documents(data)


# -- a Raw summary on text completion -------------------------------------------------------------

#: a recorded text-completion case (instruct off, SillyTavern's Default context) and one whose
#: ChatML instruct template (on) a variant borrows
TC_CASE = "mem_sum_tc_classic_default.json"
CHATML_CASE = "mem_wi_tc_chatml.json"


def _tc_raw_case(instruct_from: str | None) -> dict[str, Any]:
    """The recorded text-completion case with the Raw builder (two messages a request), and
    optionally another case's instruct and context templates."""
    folder = ROOT.path / cases.ST_DIR / "memory"
    if not (folder / TC_CASE).is_file():
        pytest.skip(ROOT.absence_reason() or f"{TC_CASE} is not in the conformance data")
    data = json.loads((folder / TC_CASE).read_text(encoding="utf-8"))
    summary = data["inputs"]["memory_settings"]
    summary["prompt_builder"], summary["maxMessagesPerRequest"] = 1, 2
    if instruct_from is not None:
        other = json.loads((folder / instruct_from).read_text(encoding="utf-8"))
        for key in ("instruct", "context"):
            data["inputs"][key] = other["inputs"][key]
            data["effective_settings"]["power_user"][key] = other["effective_settings"][
                "power_user"
            ][key]
    return data


def _expected_raw_prompt(data: dict[str, Any]) -> str:
    """SillyTavern 1.18's ``createRawPrompt(rawPrompt, 'textgenerationwebui', false, false,
    summaryPrompt)``, written out from the case's own templates (``wrap`` on, no names: a
    quiet raw prompt names no speaker)."""
    inputs = data["inputs"]
    settings = inputs["memory_settings"]
    system = settings["prompt"].replace("{{words}}", str(settings["promptWords"]))
    # getRawSummaryPrompt: the first messages (no summary yet), two a request
    raw = "\n\n".join(f"{m['name']}:\n{m['mes']}" for m in inputs["chat"][:2])
    user = inputs["persona"]["name"]
    instruct = inputs["instruct"]
    if not instruct["enabled"]:
        return f"{system.strip()}\n{user}: {raw}\n"
    story = f"{instruct['story_string_prefix']}\n{system}{instruct['story_string_suffix']}"
    if not instruct["story_string_suffix"] and not story.endswith("\n"):
        story += "\n"
    message = f"{instruct['input_sequence']}\n{raw}{instruct['input_suffix'] or chr(10)}"
    last = instruct["last_system_sequence"] or instruct["output_sequence"]
    return f"{story}{message}{last}\n"


@pytest.mark.parametrize("instruct_from", [None, CHATML_CASE], ids=["plain", "chatml"])
def test_a_raw_summary_on_text_completion_sends_the_formatted_prompt(
    instruct_from: str | None,
) -> None:
    data = _tc_raw_case(instruct_from)
    run = asyncio.run(run_memory_case(data))
    kinds = [g.kind for g in run.generations]
    assert kinds[:2] == ["generation", "summary"]
    generation, summary = run.generations[:2]
    assert summary.outcome.messages is None  # a text API gets a prompt, not messages
    assert summary.outcome.prompt == _expected_raw_prompt(data)
    # generateRaw asks the text backend with a normal generation's stop strings
    assert summary.outcome.stop == generation.outcome.stop
    if instruct_from is None:
        assert summary.outcome.stop == data["requests"][0]["request_body"]["stop"]
