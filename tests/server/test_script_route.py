"""``POST /chats/{id}/script``: an STscript run on the user's chat, its generations counted
against the turn rate, its failures answered as SillyTavern's errors (never a 500)."""

from __future__ import annotations

from pathlib import Path

from chat._server import HangingServer, Reply
from chat.conftest import stock_world
from tavernkit.server.settings import RateLimit

from ._live import live_server
from ._site import Site, site
from .conftest import settings

__all__ = ["site"]  # the fixture, used by name


async def test_a_script_runs_on_the_chat_and_answers_its_pipe(site: Site) -> None:
    site.upstream.script(Reply(text="Herons."))
    chat = await site.new_chat()
    response = await site.client.post(
        f"/chats/{chat}/script",
        json={"script": "/gen Name a bird. | /sendas name=Mira {{pipe}} | /echo done | /pass ok"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["pipe"] == "ok" and body["error"] is None
    assert body["toasts"] == [
        {"type": "info", "message": "done", "title": None, "options": {"escapeHtml": True}}
    ]
    assert await site.stored_reply(chat) == "Herons."


async def test_a_failing_script_answers_its_error(site: Site) -> None:
    chat = await site.new_chat()
    response = await site.client.post(f"/chats/{chat}/script", json={"script": "/pass {: x"})
    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["name"] == "SlashCommandParserError"
    assert error["message"].startswith("Unclosed closure at position")


async def test_generations_count_against_the_turn_rate(tmp_path: Path) -> None:
    conf = settings(tmp_path / "home", turn_rate=RateLimit(1, 60.0))
    async with HangingServer() as upstream, live_server(conf) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        upstream.script(Reply(text="One."), Reply(text="Two."))
        chat = (await tk.chats.new_chat("Mira")).id
        async with server.client() as client:
            free = await client.post(f"/chats/{chat}/script", json={"script": "/setvar key=a 1"})
            assert free.status_code == 200
            response = await client.post(
                f"/chats/{chat}/script", json={"script": "/gen one | /gen two"}
            )
    assert response.status_code == 429, response.text
    assert len(upstream.requests) == 1


async def test_gen_genraw_and_trigger_each_count_and_carry_length_and_stop(
    tmp_path: Path,
) -> None:
    """``/gen`` and ``/genraw`` send ``length=`` as the reply's length and ``stop=[…]`` as
    stop strings (SillyTavern's ephemeral stopping strings); each of them and ``/trigger``
    counts as one model call, so the fourth is refused under a limit of three."""
    conf = settings(tmp_path / "home", turn_rate=RateLimit(3, 60.0))
    async with HangingServer() as upstream, live_server(conf) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        upstream.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
        chat = (await tk.chats.new_chat("Mira")).id
        script = (
            '/gen length=20 stop=["\\n", "END", "\\n"] one | /genraw length=7 stop=["##"] two'
            " | /trigger | /gen four"
        )
        async with server.client() as client:
            response = await client.post(f"/chats/{chat}/script", json={"script": script})
    assert response.status_code == 429, response.text
    assert len(upstream.requests) == 3
    quiet, raw, turn = (r.body for r in upstream.requests)
    assert quiet["max_tokens"] == 20 and quiet["stop"] == ["\n", "END"]
    assert quiet["messages"][-1] == {"role": "system", "content": "one"}
    assert raw["max_tokens"] == 7 and raw["stop"] == ["##"]
    assert raw["messages"] == [{"role": "user", "content": "two"}]
    assert "stop" not in turn  # the stop strings last for their own generation only
