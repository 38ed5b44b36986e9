"""``GET /metrics`` over a real uvicorn on loopback with a scripted upstream: a turn is
counted (started, finished, its first-piece and per-piece histograms, no stream left open), a
failed turn by its error class, who may read the metrics with accounts on, and each app
counting in a registry of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chat._server import Reply
from tavernkit.server.metrics import ServerMetrics

from ._live import live_server
from ._site import Site, site
from ._sse import parse_events
from .conftest import PASSWORD, Users, settings

__all__ = ["site"]  # the fixture, used by name

METRICS_TOKEN = "mt-canary-scrape-0042"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exposition's samples by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def scrape(client: httpx.AsyncClient, **headers: str) -> dict[Any, float]:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


async def run_turn(site: Site, reply: Reply) -> list[str]:
    site.upstream.script(reply)
    chat = await site.new_chat()
    url = (await site.start(chat)).json()["events"]
    response = await site.client.get(url)
    return [e.type for e in parse_events(response.content)]


async def test_a_turn_is_counted_with_its_piece_latencies(site: Site) -> None:
    words = "one two three four five six"
    chunks = [w + " " for w in words.split()]
    assert (await run_turn(site, Reply(text=words, chunks=chunks, pace=0.01)))[-1] == "done"
    got = await scrape(site.client)
    assert got[("tavernkit_turns_started_total", (("verb", "send"),))] == 1
    assert got[("tavernkit_turns_finished_total", (("status", "completed"),))] == 1
    assert got[("tavernkit_turn_first_piece_seconds_count", ())] == 1
    assert got[("tavernkit_turn_first_piece_seconds_sum", ())] > 0
    # every piece after the first is one interval
    assert got[("tavernkit_turn_piece_interval_seconds_count", ())] >= len(chunks) - 1
    assert ("tavernkit_turn_piece_interval_seconds_bucket", (("le", "+Inf"),)) in got
    assert got[("tavernkit_streams_open", ())] == 0  # the stream read above has ended
    assert not any(name == "tavernkit_turn_failures_total" for name, _ in got)


async def test_a_failed_turn_is_counted_by_its_error_class(site: Site) -> None:
    types = await run_turn(site, Reply(status=401, error={"error": {"message": "bad key"}}))
    assert types[-1] == "done"
    got = await scrape(site.client)
    assert got[("tavernkit_turns_finished_total", (("status", "failed"),))] == 1
    failures = {
        labels: value
        for (name, labels), value in got.items()
        if name == "tavernkit_turn_failures_total"
    }
    assert sum(failures.values()) == 1
    ((label, error_class),) = next(iter(failures))
    assert label == "error_class" and error_class  # e.g. AuthenticationError


@pytest.mark.parametrize("users", [{"metrics_token": METRICS_TOKEN}], indirect=True)
async def test_with_accounts_only_admins_and_the_metrics_token_read_them(users: Users) -> None:
    server = users.server
    assert (await users.ann.get("/metrics")).status_code == 403
    async with server.client() as anonymous:
        assert (await anonymous.get("/metrics")).status_code == 401
        wrong = {"Authorization": "Bearer mt-not-it"}
        assert (await anonymous.get("/metrics", headers=wrong)).status_code == 401
        await scrape(anonymous, Authorization=f"Bearer {METRICS_TOKEN}")
        # the metrics token opens /metrics and nothing else
        listed = await anonymous.get(
            "/characters", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        assert listed.status_code == 401
    await scrape(users.admin)
    assert PASSWORD  # the admin signed in with it (conftest)


async def test_without_a_metrics_token_a_scraper_needs_an_admin(tmp_path: Path) -> None:
    conf = settings(tmp_path / "home", accounts=True)
    async with live_server(conf) as server, server.client() as anonymous:
        # no token configured: an empty bearer matches nothing
        for sent in ("Bearer", "Bearer x"):
            refused = await anonymous.get("/metrics", headers={"Authorization": sent})
            assert refused.status_code == 401


def test_each_app_counts_in_its_own_registry() -> None:
    one, two = ServerMetrics(), ServerMetrics()  # no duplicate-name error from a shared one
    one.turn_started("send")
    assert b'tavernkit_turns_started_total{verb="send"} 1.0' in one.render()
    assert b"tavernkit_turns_started_total{" not in two.render()


async def test_a_postgresql_server_reports_its_pool(tmp_path: Path, postgres_url: str) -> None:
    conf = settings(tmp_path / "home", database=postgres_url, database_pool=7)
    async with live_server(conf) as server, server.client() as client:
        got = await scrape(client)
        assert got[("tavernkit_pool_max_connections", (("pool", "database"),))] == 7
        assert got[("tavernkit_pool_connections_in_use", (("pool", "database"),))] == 0
        store = server.state.tavern.store
        async with store._read():
            got = await scrape(client)
        assert got[("tavernkit_pool_connections_in_use", (("pool", "database"),))] == 1


async def test_a_sqlite_server_reports_no_pool(site: Site) -> None:
    got = await scrape(site.client)
    assert not any(name.startswith("tavernkit_pool_") and labels for name, labels in got)
