"""``POST /tasks`` over a real uvicorn: the normalized result, its stream, the chat it reads,
and failures as GenerateTaskError codes with their statuses."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from chat._server import HangingServer, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern

from ._live import LiveServer, live_server
from ._sse import parse_events
from .conftest import settings

ASK = [{"role": "user", "content": "Name {{char}}'s ferry."}]


@dataclass
class Site:
    server: LiveServer
    upstream: HangingServer
    client: httpx.AsyncClient
    tk: Tavern

    async def task(self, **body: Any) -> httpx.Response:
        return await self.client.post("/tasks", json={"task_messages": ASK, **body})


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async with HangingServer() as upstream, live_server(settings(tmp_path / "home")) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        async with server.client() as client:
            yield Site(server, upstream, client, tk)


async def test_a_task_answers_with_the_normalized_result(site: Site) -> None:
    site.upstream.script(Reply(text="The Dusk Swan.", usage=(20, 4)))
    chat = await site.tk.chats.new_chat("Mira")
    response = await site.task(chat_id=chat.id)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "assistant_text": "The Dusk Swan.",
        "tool_calls": [],
        "json_data": None,
        "reasoning": None,
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
        "model": "m1",
    }
    sent = json.dumps(site.upstream.requests[-1].body["messages"])
    assert "Name Mira's ferry." in sent and "Mira keeps the ferry." in sent  # card and macros
    assert len((await site.tk.chats.load(chat.id)).messages) == 1  # a task stores nothing


async def test_tools_and_json_schema_come_back_parsed(site: Site) -> None:
    site.upstream.script(Reply(tool_calls=[("ferry", {"name": "Swan"})]))
    tool = {
        "type": "function",
        "function": {
            "name": "ferry",
            "description": "name the ferry",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
    called = await site.task(tools=[tool], tool_choice="required")
    assert called.status_code == 200, called.text
    calls = called.json()["tool_calls"]
    assert [(c["name"], c["args"]) for c in calls] == [("ferry", {"name": "Swan"})]
    site.upstream.script(Reply(text='{"name": "Swan"}'))
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    shaped = await site.task(json_schema={"name": "ferry", "schema": schema})
    assert shaped.json()["json_data"] == {"name": "Swan"}


async def test_a_streamed_task_sends_text_then_the_result(site: Site) -> None:
    site.upstream.script(Reply(text="The Dusk Swan, of course."))
    response = await site.task(stream=True)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_events(response.content)
    assert {e.type for e in events[:-1]} == {"text"}
    assert "".join(e.data["text"] for e in events[:-1]) == "The Dusk Swan, of course."
    assert events[-1].type == "result"
    assert events[-1].data["assistant_text"] == "The Dusk Swan, of course."


async def test_failures_answer_with_their_code_and_status(site: Site) -> None:
    both = await site.task(tools=[{"type": "function", "function": {"name": "x"}}], json_schema={})
    assert both.status_code == 400
    assert both.json()["error"]["code"] == "invalid_input"
    assert both.json()["error"]["field"] == "tools"
    unknown = await site.task(world_info_source="everything")
    assert (
        unknown.status_code == 422 and unknown.json()["error"]["field"] == "body.world_info_source"
    )
    assert (await site.task(chat_id="no-such-chat")).status_code == 404
    assert (await site.client.post("/tasks", json={"task_messages": []})).status_code == 422
    site.upstream.script(Reply(status=401, error={"error": {"message": "bad key sk-live-2"}}))
    no_key = await site.task()
    assert no_key.status_code == 424
    assert no_key.json()["error"]["code"] == "auth_missing"
    assert "sk-live-2" not in no_key.text
    site.upstream.script(Reply(status=429, error={"error": {"message": "slow"}}))
    limited = await site.task()
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limit"
    site.upstream.script(Reply(status=401, error={"error": {"message": "bad key sk-live-3"}}))
    streamed = await site.task(stream=True)
    events = parse_events(streamed.content)
    assert events[-1].type == "error" and events[-1].data["code"] == "auth_missing"
    assert "sk-live-3" not in streamed.text
