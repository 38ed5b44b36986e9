"""Every file of the shared wire corpus, replayed through a Provider over MockTransport.

Expectations are snapshots (tests/providers/snapshots/<provider>/<file>.json), generated once
with TAVERNKIT_UPDATE_SNAPSHOTS=1, reviewed, then asserted. Each file is replayed whole and,
by hypothesis, cut at random offsets (including inside UTF-8 characters and CRLF pairs): the
normalized result must not depend on how the network split the bytes.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.providers.base import ErrorContext
from tavernkit.providers.kobold import parse_version

from ._replay import adapter_for, manifest_entries, replay, snapshot_path, wire_root

ENTRIES = manifest_entries()
REPLAYABLE = [e for e in ENTRIES if adapter_for(e) is not None]
UPDATE = os.environ.get("TAVERNKIT_UPDATE_SNAPSHOTS") == "1"

pytestmark = pytest.mark.skipif(not ENTRIES, reason=f"wire corpus not found at {wire_root()}")


def _body(entry: dict) -> bytes:
    return (wire_root() / entry["path"]).read_bytes()


def test_every_corpus_file_has_an_adapter_or_a_reader() -> None:
    unhandled = [e["path"] for e in ENTRIES if adapter_for(e) is None]
    assert unhandled == ["koboldcpp/version.json"]


def test_kobold_version() -> None:
    entry = next(e for e in ENTRIES if e["path"] == "koboldcpp/version.json")
    assert parse_version(_body(entry), ErrorContext()) == ("KoboldCpp", "1.76")


@pytest.mark.parametrize("entry", REPLAYABLE, ids=[e["path"] for e in REPLAYABLE])
async def test_replay_matches_snapshot(entry: dict) -> None:
    result = await replay(entry, _body(entry))
    path = snapshot_path(entry)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert path.is_file(), f"no snapshot for {entry['path']}; run with TAVERNKIT_UPDATE_SNAPSHOTS=1"
    assert result == json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("entry", REPLAYABLE, ids=[e["path"] for e in REPLAYABLE])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), min_size=1, max_size=40))
def test_replay_is_independent_of_chunking(entry: dict, cuts: list[int]) -> None:
    body = _body(entry)
    whole = asyncio.run(replay(entry, body))
    assert asyncio.run(replay(entry, body, cuts)) == whole


@pytest.mark.parametrize(
    "entry",
    [e for e in REPLAYABLE if e["path"].endswith(".sse") and e["bytes"] < 40_000],
    ids=lambda e: e["path"],
)
async def test_replay_byte_by_byte(entry: dict) -> None:
    body = _body(entry)
    assert await replay(entry, body, list(range(len(body)))) == await replay(entry, body)
