"""The <function_calls> protocol: rendering, parsing malformed output, history, retries."""

from __future__ import annotations

import pytest

from tavernkit.errors import GenerateTaskError
from tavernkit.tools import ToolArgumentsError, ToolCallParseError, XmlProtocol
from tavernkit.tools.prompt_xml import cdata, xml_unescape

from ._fixtures import SEARCH, TOOLS, TRIGGER

P = XmlProtocol(TRIGGER)


def call(name: str, args: str) -> str:
    return (
        f"<function_call>\n  <tool>{name}</tool>\n  <args_json>{args}</args_json>\n</function_call>"
    )


def reply(*calls: str, before: str = "Let me check.\n", after: str = "") -> str:
    return (
        f"{before}{TRIGGER}\n<function_calls>\n" + "\n".join(calls) + f"\n</function_calls>{after}"
    )


def problem(text: str, *, mandatory: bool = False) -> ToolCallParseError:
    with pytest.raises(ToolCallParseError) as info:
        P.parse(text, TOOLS, mandatory=mandatory)
    assert info.value.code == "tool_call_parse"
    return info.value


# -- writing -----------------------------------------------------------------------------


def test_json_schema_catalogue() -> None:
    text = P.instructions(TOOLS)
    assert text.startswith("You have access to the following available tools")
    for line in (
        '1. <tool name="search_web">',
        "   Required parameters: query",
        "   Optional parameters: limit",
        "   Parameter details:",
        "Schema rules: additionalProperties=false",
        "- query:",
        "  - required: Yes",
        '  - constraints: {"minimum": 1, "maximum": 10}',
        "  - default: 3",
        '2. <tool name="take-note">',
        "- tags:",
        '  - constraints: {"uniqueItems": true, "items.type": "string"}',
        f"1. Begin a new line with exactly {TRIGGER}",
        "Now strictly follow the above specifications.",
    ):
        assert line in text, line
    assert "<parameters_schema>" not in text
    assert "Tool-choice constraint" not in text  # auto adds no line


def test_table_catalogue_and_choice_lines() -> None:
    text = XmlProtocol(TRIGGER, style="table").instructions(
        TOOLS,
        tool_choice={"type": "function", "function": {"name": "search_web"}},
        required_function_name="search_web",
    )
    assert "<required_args>query (string): what to look for</required_args>" in text
    assert "<optional_args>limit (integer)</optional_args>" in text
    assert "<purpose>Search the web.</purpose>" in text
    assert "- Required function name for this response: search_web." in text
    assert "call ONLY tool 'search_web'" in text
    assert "do NOT call any tool" in P.instructions(TOOLS, tool_choice="none")
    assert "MUST call at least one" in P.instructions(TOOLS, tool_choice="required")
    assert "'ghost' is unavailable" in P.instructions(TOOLS, tool_choice={"name": "ghost"})


def test_render_then_parse_is_identity() -> None:
    args = {"query": 'a]]>b <&> "q"', "limit": 2}
    text = "Sure.\n" + P.render_calls([("search_web", args), ("take-note", {"text": "ü"})])
    parsed = P.parse(text, TOOLS)
    assert parsed.triggered and parsed.display_text == "Sure."
    assert [(c.name, c.args) for c in parsed.calls] == [
        ("search_web", args),
        ("take-note", {"text": "ü"}),
    ]
    assert parsed.calls[0].raw["function"]["name"] == "search_web"
    assert parsed.calls[0].id.startswith("call_0_")


def test_insert_instructions_after_leading_system_run() -> None:
    msgs = [
        {"role": "system", "content": "a"},
        {"role": "system", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "system", "content": "d"},
    ]
    out = P.insert_instructions(msgs, "PROTO")
    assert [m["content"] for m in out] == ["a", "b", "PROTO", "c", "d"]
    assert out[2]["role"] == "system"


# -- reading good output ----------------------------------------------------------------------


def test_extra_prose_around_the_block_is_ignored() -> None:
    text = reply(
        call("search_web", cdata('{"query": "cats"}')),
        before="Thinking aloud.\n\n",
        after="\nHope that helps!",
    ).replace("<function_calls>", "Here you go:\n<function_calls>", 1)
    parsed = P.parse(text, TOOLS)
    assert parsed.display_text == "Thinking aloud."
    assert parsed.calls[0].args == {"query": "cats"}


def test_entities_empty_args_and_multiple_calls() -> None:
    text = reply(
        call("search_web", "{&quot;query&quot;: &quot;a&amp;b&quot;}"),
        call("take-note", cdata("")),
        call("take-note", "  "),
    )
    parsed = P.parse(text, TOOLS, validate=False)
    assert [c.args for c in parsed.calls] == [{"query": "a&b"}, {}, {}]
    assert xml_unescape("&#65;&#x42;&lt;") == "AB<"


def test_closing_tags_inside_cdata_do_not_close() -> None:
    args = cdata('{"query": "</args_json></function_call></function_calls>"}')
    parsed = P.parse(reply(call("search_web", args)), TOOLS)
    assert parsed.calls[0].args["query"] == "</args_json></function_call></function_calls>"


def test_trigger_inside_reasoning_does_not_count() -> None:
    rehearsal = f"<think>I will write {TRIGGER} then the calls</think>"
    text = rehearsal + "\nAnswer: no tools needed."
    parsed = P.parse(text, TOOLS)
    assert not parsed.triggered and parsed.calls == () and parsed.display_text == text
    real = rehearsal + "\n" + reply(call("search_web", cdata('{"query": "x"}')), before="")
    assert P.parse(real, TOOLS).calls[0].args == {"query": "x"}


def test_no_trigger_is_plain_text_unless_mandatory() -> None:
    assert P.parse("Just chatting.", TOOLS).calls == ()
    err = problem("Just chatting.", mandatory=True)
    assert err.problem == "missing_trigger"
    naked = (
        "<function_calls><function_call><tool>search_web</tool></function_call></function_calls>"
    )
    assert "written without it" in problem(naked, mandatory=True).message


# -- malformed output -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "fragment"),
    [
        (f"{TRIGGER}\nI'd like to search.", "missing_block", "Missing <function_calls>"),
        (
            f"{TRIGGER}\n<function_call><tool>x</tool></function_call>",
            "missing_block",
            "inside a <function_calls> wrapper",
        ),
        (
            f"{TRIGGER}\n<function_calls>\n" + call("search_web", cdata('{"query":"q"}')),
            "malformed_xml",
            "Missing closing </function_calls>",
        ),
        (
            f"{TRIGGER}\n<function_calls>\n</function_calls>",
            "malformed_xml",
            "No <function_call> blocks",
        ),
        (
            f"{TRIGGER}\n<function_calls><function_call><tool>search_web</tool></function_calls>",
            "malformed_xml",
            "Missing closing </function_call>",
        ),
        (
            reply("<function_call><args_json>{}</args_json></function_call>"),
            "malformed_xml",
            "missing <tool>",
        ),
        (
            reply("<function_call><tool> </tool><args_json>{}</args_json></function_call>"),
            "malformed_xml",
            "empty <tool>",
        ),
        (
            reply("<function_call><tool>search_web</tool></function_call>"),
            "malformed_xml",
            "missing <args_json>",
        ),
        (
            reply("<function_call><tool>search_web</tool><args_json>{}</function_call>"),
            "malformed_xml",
            "Missing closing </args_json>",
        ),
        (reply(call("search_web", '<![CDATA[{"query": "q"}')), "bad_cdata", "unterminated"),
        (reply(call("search_web", cdata('{"query": "q",}'))), "bad_json", "Invalid JSON"),
        (reply(call("search_web", cdata("query=cats"))), "bad_json", "Invalid JSON"),
        (reply(call("search_web", cdata('["q"]'))), "bad_json", "must decode to a JSON object"),
        (
            reply(call("search_wbe", cdata('{"query": "q"}'))),
            "unknown_function",
            "unknown function 'search_wbe'",
        ),
        (
            reply(call("search_web", cdata('{"q": "cats"}'))),
            "invalid_arguments",
            "do not match the schema",
        ),
    ],
)
def test_malformed(text: str, kind: str, fragment: str) -> None:
    err = problem(text)
    assert err.problem == kind
    assert fragment in err.message
    assert err.details["raw_text"] == text


def test_bad_json_carries_raw_arguments() -> None:
    err = problem(reply(call("search_web", cdata('{"query": "q",}'))))
    assert err.raw_arguments == '{"query": "q",}'
    assert err.details["raw_arguments"] == '{"query": "q",}'
    assert err.name == "search_web"


def test_schema_errors_are_listed() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        P.parse(reply(call("search_web", cdata('{"query": "", "limit": 99, "x": 1}'))), TOOLS)
    paths = {(e["path"], e["keyword"]) for e in info.value.details["errors"]}
    assert ("$", "additionalProperties") in paths
    assert ("$.query", "minLength") in paths
    assert ("$.limit", "maximum") in paths


# -- history and retries --------------------------------------------------------------------


def test_history_rewrite() -> None:
    history = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "find cats", "tool_call_id": "stray"},
        {
            "role": "assistant",
            "content": "Searching.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search_web", "arguments": '{"query": "cats"}'},
                },
                {"id": "c2", "name": "take-note", "input": {"text": "x"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "search_web", "content": "3 cats"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "saved"}]},
        {"role": "tool", "tool_call_id": "unknown", "content": "orphan"},
    ]
    out = P.rewrite_history(history)
    assert "tool_call_id" not in out[1]
    assert out[2]["content"].startswith("Searching.\n\n" + TRIGGER + "\n<function_calls>")
    assert "tool_calls" not in out[2]
    assert [(c.name, c.args) for c in P.parse(out[2]["content"], TOOLS).calls] == [
        ("search_web", {"query": "cats"}),
        ("take-note", {"text": "x"}),
    ]
    assert out[3] == {
        "role": "user",
        "content": "Tool execution result:\n- Tool name: search_web\n"
        '- Tool arguments: {"query":"cats"}\n- Execution result:\n'
        "<tool_result>\n3 cats\n</tool_result>",
    }
    assert "<tool_result>\nsaved\n</tool_result>" in out[4]["content"]
    assert out[5] == {"role": "user", "content": "orphan"}
    assert history[2]["tool_calls"]  # the input is not mutated


def test_history_rewrite_rejects_bad_arguments() -> None:
    bad = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}],
        }
    ]
    with pytest.raises(GenerateTaskError) as info:
        P.rewrite_history(bad)
    assert info.value.code == "invalid_input"
    assert info.value.details["field"] == "messages[0].tool_calls[0]"


def test_corrective_message() -> None:
    err = problem(reply(call("search_web", cdata("nope"))))
    text = P.corrective_message(err, "x" * 2500 + "```", required_function_name="search_web")
    assert text.startswith("Your previous response attempted function calling")
    assert f"Error details: {err.message}" in text
    assert f"First line must be exactly: {TRIGGER}" in text
    assert "<function_calls>" in text and "<tool>search_web</tool>" in text
    assert "Required function name: search_web." in text
    assert "[...truncated]" in text and "x" * 2001 not in text
    assert text.endswith("Do not output any extra prose after the function payload.")


async def test_retry_succeeds_after_correction() -> None:
    sent: list[list[dict]] = []
    good = reply(call("search_web", cdata('{"query": "cats"}')))

    async def resend(messages: list[dict]) -> str:
        sent.append(messages)
        return good

    bad = reply(call("search_web", cdata("{oops")))
    parsed = await P.parse_with_retries(
        bad, TOOLS, [{"role": "user", "content": "go"}], resend, max_retries=2
    )
    assert parsed.calls[0].args == {"query": "cats"}
    assert len(sent) == 1
    assert sent[0][1] == {"role": "assistant", "content": bad}
    assert sent[0][2]["role"] == "user" and "Invalid JSON" in sent[0][2]["content"]


async def test_retry_is_bounded() -> None:
    count = 0

    async def resend(messages: list[dict]) -> str:
        nonlocal count
        count += 1
        return f"{TRIGGER}\nstill wrong"

    with pytest.raises(ToolCallParseError) as info:
        await P.parse_with_retries(f"{TRIGGER}\nwrong", TOOLS, [], resend, max_retries=3)
    assert count == 3
    assert info.value.details["attempts"] == 4


async def test_missing_required_call_is_retried_then_fails() -> None:
    async def resend(messages: list[dict]) -> str:
        return "I refuse."

    with pytest.raises(ToolCallParseError) as info:
        await P.parse_with_retries(
            "No.",
            TOOLS,
            [],
            resend,
            mandatory=True,
            required_function_name="search_web",
            max_retries=1,
        )
    assert info.value.problem == "missing_trigger"
    plain = await P.parse_with_retries("Hello!", TOOLS, [], resend, max_retries=1)
    assert plain.display_text == "Hello!" and plain.calls == ()


async def test_retry_request_failure_keeps_parse_error_and_abort_propagates() -> None:
    async def boom(messages: list[dict]) -> str:
        raise ConnectionError("down")

    with pytest.raises(ToolCallParseError) as info:
        await P.parse_with_retries(f"{TRIGGER}\nx", TOOLS, [], boom)
    assert "ConnectionError" in info.value.details["retry_error"]

    async def aborted(messages: list[dict]) -> str:
        raise GenerateTaskError("aborted", "stop")

    with pytest.raises(GenerateTaskError) as info2:
        await P.parse_with_retries(f"{TRIGGER}\nx", TOOLS, [], aborted)
    assert info2.value.code == "aborted"


def test_trigger_must_be_one_line() -> None:
    with pytest.raises(GenerateTaskError):
        XmlProtocol("a\nb")
    assert SEARCH.name == "search_web"
