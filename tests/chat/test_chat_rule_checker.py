"""The response review's rule checker (brief 003), one test per rule, on real chat turns: the
owner's ``prose_linter`` MCP registration served over streamable HTTP on loopback by the test
MCP server (tests/tools/_mcp_server.py), the author and the reviewer played by the scripted
OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tavernkit.errors import ToolSourceError
from tavernkit.generation.review import LINTER_LIMIT
from tavernkit.models.mcp import McpServer
from tavernkit.tools import FunctionTool
from tools._mcp_server import Seen, serve_http

from ._server import Reply
from .conftest import World, use_profile

DRAFT = "Mira smiles smiles! A shivers down the spine moment."
FINDING = "repeated word: 'smiles'"


def verdict(result: str, *findings: tuple[str, str, str]) -> str:
    return json.dumps(
        {
            "verdict": result,
            "findings": [{"category": c, "problem": p, "direction": d} for c, p, d in findings],
        }
    )


def _reviews(world: World) -> list[dict[str, Any]]:
    return [r.body for r in world.server.requests if "response_format" in r.body]


def _packet(review: dict[str, Any]) -> str:
    return str(review["messages"][-1]["content"])


def _instructions(review: dict[str, Any]) -> str:
    return str(review["messages"][0]["content"])


def _lint_calls(seen: Seen) -> int:
    return sum(1 for name, _ in seen.calls if name == "lint")


@pytest.fixture
async def linter(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, Seen]]:
    output = getattr(request, "param", "plain")
    async with serve_http(lint_output=output) as served:
        yield served


async def _register(world: World, url: str, **fields: Any) -> None:
    fields.setdefault("linter_tool", "lint")
    await world.tk.mcp.add(
        McpServer(name="linter", transport="http", url=url, purpose="prose_linter", **fields)
    )
    await use_profile(world, "reviewed", model="m1", review={})


async def _turn(world: World, *replies: Reply) -> Any:
    world.server.script(*replies)
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Can I board?")
    assert out.status == "completed", out.error
    return info, out


async def test_the_report_reaches_the_reviewer_advisory_and_forces_a_detailed_review(
    world: World, linter: tuple[str, Seen]
) -> None:
    url, seen = linter
    await _register(world, url)
    _, out = await _turn(world, Reply(text=DRAFT), Reply(text=verdict("pass")))
    assert out.text == DRAFT
    (review,) = _reviews(world)
    packet = _packet(review)
    assert '<review rubric="roleplay-response-v1" depth="detailed">' in packet
    report = packet.split('<prose_linter_report advisory="true">')[1].split("</prose_linter")[0]
    assert FINDING in report and "exclamation mark" in report and "shivers down" in report
    assert "Review in detail" in _instructions(review)
    assert seen.calls == [("lint", {"text": DRAFT})]  # the candidate was the only input


@pytest.mark.parametrize("linter", ["huge"], indirect=True)
async def test_the_report_is_cut_to_32_kb(world: World, linter: tuple[str, Seen]) -> None:
    await _register(world, linter[0])
    await _turn(world, Reply(text="Aboard."), Reply(text=verdict("pass")))
    packet = _packet(_reviews(world)[0])
    report = packet.split('<prose_linter_report advisory="true">\n')[1].split("\n</prose_linter")[0]
    assert len(report.encode()) == LINTER_LIMIT


async def test_the_report_never_reaches_the_author_the_chat_or_the_logs(
    world: World, linter: tuple[str, Seen], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await _register(world, linter[0])
    info, out = await _turn(
        world,
        Reply(text=DRAFT),
        Reply(text=verdict("revise", ("repetition", "a doubled word", "say it once"))),
        Reply(text="Mira smiles. Aboard, then."),
        Reply(text=verdict("pass")),
    )
    assert out.text == "Mira smiles. Aboard, then."
    author_requests = [r.body for r in world.server.requests if "response_format" not in r.body]
    revision = json.dumps(author_requests[1]["messages"])
    assert "say it once" in revision  # the reviewer's own finding reaches the author
    assert "repeated word" not in revision and "exclamation mark" not in revision
    stored = json.dumps([m.data for m in (await world.chats.load(info.id)).messages])
    assert "repeated word" not in stored and "exclamation mark" not in stored
    assert "repeated word" not in caplog.text and "exclamation mark" not in caplog.text
    assert "shivers" not in caplog.text  # nor the draft itself


async def test_the_author_never_sees_or_dispatches_the_checker_tools(
    world: World, linter: tuple[str, Seen]
) -> None:
    url, seen = linter
    await _register(world, url)
    with pytest.raises(ToolSourceError, match="never the author's"):
        await world.tk.context().mcp_tools("linter")
    assert await world.tk.context().mcp_tools() == []
    # a chat that offers tools: the checker's are not among them, and calling one fails
    await use_profile(
        world, "with-tools", model="m1", review={}, capabilities={"supports_tools": True}
    )
    world.tk.tools.register_function_tool(FunctionTool("roll", action=lambda args: "4"))
    await _turn(
        world,
        Reply(tool_calls=[("linter__lint", {"text": "my own draft"})]),
        Reply(text="Aboard."),
        Reply(text=verdict("pass")),
    )
    assert [t["function"]["name"] for t in world.server.requests[0].body["tools"]] == ["roll"]
    result = world.server.requests[1].body["messages"][-1]
    assert result["role"] == "tool" and "Error" in result["content"]
    assert seen.calls == [("lint", {"text": "Aboard."})]  # only the review's check ran


@pytest.mark.parametrize("linter", ["fail"], indirect=True)
async def test_a_failing_checker_lets_review_proceed(
    world: World, linter: tuple[str, Seen], caplog: pytest.LogCaptureFixture
) -> None:
    await _register(world, linter[0])
    _, out = await _turn(world, Reply(text="Aboard."), Reply(text=verdict("pass")))
    assert out.text == "Aboard."
    (review,) = _reviews(world)
    assert "prose_linter_report" not in _packet(review)
    assert "rule checker failed (ToolSourceUnavailable)" in caplog.text
    assert "linter crashed" not in caplog.text


async def test_a_checker_tool_must_take_one_required_string(
    world: World, linter: tuple[str, Seen]
) -> None:
    url, seen = linter
    await _register(world, url, linter_tool="add")  # two integers: not a prose checker
    with pytest.raises(ToolSourceError, match="exactly one required string argument"):
        await world.tk.mcp.linter()
    _, out = await _turn(world, Reply(text="Aboard."), Reply(text=verdict("pass")))
    assert out.text == "Aboard." and "prose_linter_report" not in _packet(_reviews(world)[0])
    assert seen.calls == []  # never called with the draft


@pytest.mark.parametrize("linter", ["empty"], indirect=True)
async def test_an_empty_report_cannot_approve_prose(world: World, linter: tuple[str, Seen]) -> None:
    await _register(world, linter[0])
    _, out = await _turn(
        world,
        Reply(text="Draft one."),
        Reply(text=verdict("revise", ("voice", "flat", "let Mira speak"))),
        Reply(text="Mira: aboard, then."),
        Reply(text=verdict("pass")),
    )
    # the empty report approved nothing: the reviewer's revise verdict held the draft back
    assert out.text == "Mira: aboard, then."
    first = _packet(_reviews(world)[0])
    assert "the rule checker reported nothing; this does not approve the candidate" in first
    assert 'depth="detailed"' in first


@pytest.mark.parametrize("change", ["disable", "remove"])
async def test_a_disabled_or_removed_registration_acts_as_none(
    world: World, linter: tuple[str, Seen], change: str, caplog: pytest.LogCaptureFixture
) -> None:
    url, seen = linter
    await _register(world, url)
    if change == "disable":
        await world.tk.mcp.set_enabled("linter", False)
    else:
        await world.tk.mcp.remove("linter")
    caplog.clear()
    _, out = await _turn(world, Reply(text="Aboard."), Reply(text=verdict("pass")))
    assert out.text == "Aboard."
    (review,) = _reviews(world)
    assert "prose_linter_report" not in _packet(review)
    assert 'depth="detailed"' not in _packet(review)
    assert "Review in detail" not in _instructions(review)
    assert _lint_calls(seen) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
