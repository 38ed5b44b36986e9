"""``POST /tasks`` over a real uvicorn: the normalized result, its stream, the chat it reads,
and failures as GenerateTaskError codes with their statuses."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx

from chat._server import Reply

from ._site import Site, site
from ._sse import parse_events

__all__ = ["site"]  # the fixture, used by name

ASK = [{"role": "user", "content": "Name {{char}}'s ferry."}]


async def task(site: Site, **body: Any) -> httpx.Response:
    return await site.client.post("/tasks", json={"task_messages": ASK, **body})


async def test_a_task_answers_with_the_normalized_result(site: Site) -> None:
    site.upstream.script(Reply(text="The Dusk Swan.", usage=(20, 4)))
    chat = await site.tk.chats.new_chat("Mira")
    response = await task(site, chat_id=chat.id)
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
    called = await task(site, tools=[tool], tool_choice="required")
    assert called.status_code == 200, called.text
    calls = called.json()["tool_calls"]
    assert [(c["name"], c["args"]) for c in calls] == [("ferry", {"name": "Swan"})]
    site.upstream.script(Reply(text='{"name": "Swan"}'))
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    shaped = await task(site, json_schema={"name": "ferry", "schema": schema})
    assert shaped.json()["json_data"] == {"name": "Swan"}


async def test_a_streamed_task_sends_text_then_the_result(site: Site) -> None:
    site.upstream.script(Reply(text="The Dusk Swan, of course."))
    response = await task(site, stream=True)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_events(response.content)
    assert {e.type for e in events[:-1]} == {"text"}
    assert "".join(e.data["text"] for e in events[:-1]) == "The Dusk Swan, of course."
    assert events[-1].type == "result"
    assert events[-1].data["assistant_text"] == "The Dusk Swan, of course."


async def test_failures_answer_with_their_code_and_status(site: Site) -> None:
    both = await task(site, tools=[{"type": "function", "function": {"name": "x"}}], json_schema={})
    assert both.status_code == 400
    assert both.json()["error"]["code"] == "invalid_input"
    assert both.json()["error"]["field"] == "tools"
    unknown = await task(site, world_info_source="everything")
    assert (
        unknown.status_code == 422 and unknown.json()["error"]["field"] == "body.world_info_source"
    )
    assert (await task(site, chat_id="no-such-chat")).status_code == 404
    assert (await site.client.post("/tasks", json={"task_messages": []})).status_code == 422
    site.upstream.script(Reply(status=401, error={"error": {"message": "bad key sk-live-2"}}))
    no_key = await task(
        site,
    )
    assert no_key.status_code == 424
    assert no_key.json()["error"]["code"] == "auth_missing"
    assert "sk-live-2" not in no_key.text
    site.upstream.script(Reply(status=429, error={"error": {"message": "slow"}}))
    limited = await task(
        site,
    )
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limit"
    site.upstream.script(Reply(status=401, error={"error": {"message": "bad key sk-live-3"}}))
    streamed = await task(site, stream=True)
    events = parse_events(streamed.content)
    assert events[-1].type == "error" and events[-1].data["code"] == "auth_missing"
    assert "sk-live-3" not in streamed.text
