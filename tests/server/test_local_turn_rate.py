"""The one local user (accounts off) has no turn limit by default: limits are for sharing a
server (issue 40: a local server refused 40 of 100 simultaneous turns, then its facade too).
With accounts on the default stays 60 model calls a minute per user, and a ``turn_rate``
given explicitly applies in either mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chat._server import Reply
from tavernkit.server.settings import ACCOUNT_TURN_RATE, RateLimit

from ._site import Site, site
from ._sse import parse_events
from .conftest import settings

__all__ = ["site"]

TURNS = 75
ASK = [{"role": "user", "content": "hi"}]


async def test_the_local_user_makes_more_than_sixty_turns_a_minute(site: Site) -> None:
    site.upstream.script(*[Reply(text=f"Reply {i}.") for i in range(TURNS + 10)])
    chats = [await site.new_chat() for _ in range(TURNS)]
    started = await asyncio.gather(*(site.start(chat) for chat in chats))
    assert [r.status_code for r in started] == [202] * TURNS, [
        r.text for r in started if r.status_code != 202
    ][:1]
    for response in started:
        events = parse_events((await site.client.get(response.json()["events"])).content)
        assert events[-1].data["status"] == "completed", events[-1].data
    # the facade, past the old 60 a minute, is not refused either
    answers = await asyncio.gather(
        *(
            site.client.post(
                "/v1/chat/completions", json={"model": "profile/scripted", "messages": ASK}
            )
            for _ in range(5)
        )
    )
    assert [a.status_code for a in answers] == [200] * 5, answers[0].text
    assert len(site.upstream.requests) == TURNS + 5


def test_the_defaults_limit_accounts_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert settings(home).turn_limit is None
    assert settings(home, accounts=True).turn_limit == ACCOUNT_TURN_RATE == RateLimit(60, 60.0)
    chosen = RateLimit(5, 60.0)
    assert settings(home, turn_rate=chosen).turn_limit == chosen
    assert settings(home, accounts=True, turn_rate=chosen).turn_limit == chosen
