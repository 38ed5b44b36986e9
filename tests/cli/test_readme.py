"""The README's Python examples run as written: the tools example against a configured profile
(a scripted OpenAI-compatible server on loopback), the JSON-schema one on the embedded model
when it is installed."""

from __future__ import annotations

import ast
import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

from chat._server import Reply
from cli.test_chat_cli import ThreadServer, _local_model_available, cli, server
from tavernkit.facade import Tavern

__all__ = ["server"]  # fixture used here

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks() -> tuple[str, str]:
    """The JSON-schema example and the tools-against-a-profile example."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), flags=re.S)
    (schema,) = [b for b in blocks if "json_schema=schema" in b]
    (tools,) = [b for b in blocks if "api_preset_name=" in b]
    return schema, tools


def test_the_readme_has_the_two_python_examples() -> None:
    schema, tools = _python_blocks()
    assert "json_schema=schema" in schema and "tool_choice" not in schema
    assert 'api_preset_name="gpt"' in tools
    compile(schema, "README.md", "exec")
    compile(tools, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_tools_example_runs_against_a_configured_profile(
    server: ThreadServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-test")
    added = cli(
        "profile", "add", "gpt", "--base-url", server.server.base_url + "/v1",
        "-m", "gpt-4o", "--key-env", "TK_TEST_KEY",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    server.script(Reply(tool_calls=[("search_web", {"query": "Saltmarrow tide tables"})]))
    _, tools = _python_blocks()
    code = compile(tools, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

    async def run() -> None:
        async with Tavern(Path(os.environ["TAVERNKIT_HOME"])) as tk:
            scope: dict[str, Any] = {"ctx": tk.context()}
            await eval(code, scope)

    asyncio.run(run())
    assert capsys.readouterr().out == "[('search_web', {'query': 'Saltmarrow tide tables'})]\n"
    assert server.bodies[-1]["model"] == "gpt-4o"


@pytest.mark.skipif(not _local_model_available(), reason="the embedded model is not installed")
def test_the_json_schema_example_runs_on_the_embedded_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    schema, _ = _python_blocks()
    exec(compile(schema, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert printed.startswith("{") and "'age'" in printed, printed
