"""prompt_json: a real JSON protocol, parsed strictly with a bounded repair fallback."""

from __future__ import annotations

import json

import pytest

from tavernkit.tools import JsonProtocol, ToolArgumentsError, ToolCallParseError, protocol_for
from tavernkit.tools.prompt_json import load_json_lenient

from ._fixtures import TOOLS, TRIGGER

P = JsonProtocol(TRIGGER)


def reply(body: str, *, before: str = "On it.\n", lang: str = "json", after: str = "") -> str:
    return f"{before}{TRIGGER}\n```{lang}\n{body}\n```{after}"


def problem(text: str, *, mandatory: bool = False) -> ToolCallParseError:
    with pytest.raises(ToolCallParseError) as info:
        P.parse(text, TOOLS, mandatory=mandatory)
    return info.value


def test_protocol_for() -> None:
    assert isinstance(protocol_for("prompt_json", TRIGGER), JsonProtocol)
    assert protocol_for("prompt_xml", TRIGGER).mode == "prompt_xml"
    with pytest.raises(ValueError):
        protocol_for("native", TRIGGER)


def test_instructions_describe_the_json_shape() -> None:
    text = P.instructions(TOOLS, tool_choice="required")
    assert '{"tool_calls": [{"name": "TOOL_NAME", "arguments": {...}}]}' in text
    assert "```json" in text and "<function_calls>" not in text
    assert "Required parameters: query" in text


def test_render_then_parse_is_identity() -> None:
    calls = [("search_web", {"query": "```json {}```", "limit": 1}), ("take-note", {"text": "é"})]
    parsed = P.parse("Hi.\n" + P.render_calls(calls), TOOLS)
    assert parsed.display_text == "Hi."
    assert [(c.name, c.args) for c in parsed.calls] == calls


def test_good_variants() -> None:
    body = '{"tool_calls": [{"name": "search_web", "arguments": {"query": "cats"}}]}'
    for text in (
        reply(body),
        reply(body, lang=""),
        reply(body, after="\n\nThat is all."),  # prose after the fence
        f"{TRIGGER}\n{body}",  # a bare object without a fence
        reply(body.replace('{"query": "cats"}', '"{\\"query\\": \\"cats\\"}"')),  # string args
    ):
        parsed = P.parse(text, TOOLS)
        assert [(c.name, c.args) for c in parsed.calls] == [("search_web", {"query": "cats"})]
    missing_args = P.parse(reply('{"tool_calls": [{"name": "take-note"}]}'), TOOLS, validate=False)
    assert missing_args.calls[0].args == {}


def test_repair_is_a_fallback_for_complete_payloads() -> None:
    sloppy = "{'tool_calls': [{'name': 'search_web', 'arguments': {'query': 'cats',},},],}"
    assert P.parse(reply(sloppy), TOOLS).calls[0].args == {"query": "cats"}
    assert load_json_lenient('{"a": 1}') == ({"a": 1}, False)
    assert load_json_lenient("{'a': 1,}") == ({"a": 1}, True)
    with pytest.raises(ValueError):
        load_json_lenient("no json here at all")


@pytest.mark.parametrize(
    ("text", "kind", "fragment"),
    [
        (f"{TRIGGER}\nI will call search now.", "missing_block", "no fenced JSON object"),
        (
            f'{TRIGGER}\n```json\n{{"tool_calls": [{{"name": "search_web"',
            "bad_json",
            "never closed",
        ),
        (reply("tool_calls: search_web(cats)"), "bad_json", "invalid"),
        (reply('[{"name": "search_web", "arguments": {}}]'), "bad_shape", "got list"),
        (reply('{"calls": []}'), "bad_shape", "keys ['calls']"),
        (reply('{"tool_calls": []}'), "no_calls", "empty"),
        (reply('{"tool_calls": ["search_web"]}'), "bad_shape", "must be an object"),
        (reply('{"tool_calls": [{"arguments": {}}]}'), "bad_shape", 'no "name"'),
        (
            reply('{"tool_calls": [{"name": "search_web", "arguments": [1]}]}'),
            "bad_shape",
            "must be a JSON object",
        ),
        (
            reply('{"tool_calls": [{"name": "search_web", "arguments": "{bad"}]}'),
            "bad_json",
            "string that is not JSON",
        ),
        (
            reply('{"tool_calls": [{"name": "nope", "arguments": {}}]}'),
            "unknown_function",
            "unknown function 'nope'",
        ),
        (
            reply('{"tool_calls": [{"name": "search_web", "arguments": {"limit": 0}}]}'),
            "invalid_arguments",
            "do not match the schema",
        ),
    ],
)
def test_malformed(text: str, kind: str, fragment: str) -> None:
    err = problem(text)
    assert err.problem == kind, err.message
    assert fragment in err.message
    assert err.details["raw_text"] == text


def test_missing_trigger() -> None:
    body = '```json\n{"tool_calls": [{"name": "search_web", "arguments": {"query": "x"}}]}\n```'
    assert P.parse(body, TOOLS).calls == ()  # optional call: it is just text
    err = problem(body, mandatory=True)
    assert err.problem == "missing_trigger" and "written without it" in err.message


def test_schema_errors_carry_raw_arguments() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        P.parse(reply('{"tool_calls": [{"name": "search_web", "arguments": {"query": 5}}]}'), TOOLS)
    assert json.loads(info.value.raw_arguments or "") == {"query": 5}
    assert info.value.details["errors"][0]["path"] == "$.query"


def test_history_rewrite_uses_json_form() -> None:
    out = P.rewrite_history(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "function": {"name": "search_web", "arguments": '{"query":"q"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "found"},
        ]
    )
    assert out[0]["content"].startswith(f"{TRIGGER}\n```json\n")
    assert P.parse(out[0]["content"], TOOLS).calls[0].args == {"query": "q"}
    assert out[1]["role"] == "user" and "<tool_result>\nfound\n</tool_result>" in out[1]["content"]


def test_corrective_message() -> None:
    err = problem(reply("{oops"))
    text = P.corrective_message(err, "prev", required_function_name="take-note")
    assert "```json" in text and '"name": "take-note"' in text
    assert f"First line must be exactly: {TRIGGER}" in text
    assert "Required function name: take-note." in text


async def test_retry_round_trip() -> None:
    async def resend(messages: list[dict]) -> str:
        assert "Error details:" in messages[-1]["content"]
        return reply('{"tool_calls": [{"name": "take-note", "arguments": {"text": "ok"}}]}')

    parsed = await P.parse_with_retries(reply("{oops"), TOOLS, [], resend, max_retries=1)
    assert parsed.calls[0].name == "take-note"
