"""Memory goldens (``st-1.18/memory/*.json``): Vector Storage (vectorized world info, chat
memory) and Summarize, replayed with the recorder's mock embeddings.

Per case: every LLM request SillyTavern sent (the user's generations and the summaries, in
order) equals the one tavernkit builds, and what was embedded before the first reply (the
"Vectorize All" index, the lorebook entries, the query texts) equals what SillyTavern's server
asked its embeddings endpoint for.
"""

from __future__ import annotations

import asyncio
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
