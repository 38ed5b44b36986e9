"""generate_task with a JSON schema (native and instructed, validated), and
generate_task_stream (events ending in the result, the same error on both sides)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit import GenerateTaskError
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.tasks import TaskDone, TaskReasoningDelta, TaskTextDelta, TaskToolCallEvent
from tavernkit.tools.structured import parse_structured

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "occupation": {"type": "string"},
    },
    "required": ["name", "age", "occupation"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Alice, 32, software engineer."}]
ALICE = {"name": "Alice", "age": 32, "occupation": "software engineer"}


async def run(
    tmp_path: Path,
    replies: list[Reply],
    *,
    source: str = "custom",
    native: bool | None = True,
    **kw: Any,
) -> tuple[Any, ScriptedServer]:
    async with ScriptedServer(replies) as server:
        base = server.base_url if source == "claude" else server.base_url + "/v1"
        model = "claude-sonnet-4-5" if source == "claude" else "scripted-model"
        tk, _ = await setup_tavern(
            tmp_path, [profile(base, source=source, model=model, json_schema=native)]
        )
        try:
            result = await context(tk).generate_task(ASK, json_schema=PERSON, **kw)
        finally:
            await tk.close()
    return result, server


async def test_native_structured_output(tmp_path: Path) -> None:
    result, server = await run(tmp_path, [Reply(text=json.dumps(ALICE))])
    assert result.json_data == ALICE
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == PERSON


async def test_instructed_structured_output_without_native_support(tmp_path: Path) -> None:
    text = "Here:\n```json\n" + json.dumps(ALICE) + "\n```"
    result, server = await run(tmp_path, [Reply(text=text)], source="claude", native=None)
    assert result.json_data == ALICE
    body = server.requests[0].body
    assert "response_format" not in body
    assert "JSON Schema" in json.dumps(body)


async def test_wrapped_schema_and_repair(tmp_path: Path) -> None:
    wrapped = {"name": "person", "strict": True, "value": PERSON}
    async with ScriptedServer(
        [Reply(text='{"name": "Alice", "age": 32, "occupation": "eng",}')]
    ) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1", json_schema=True)])
        try:
            result = await context(tk).generate_task(ASK, json_schema=wrapped)
        finally:
            await tk.close()
    assert result.json_data == {"name": "Alice", "age": 32, "occupation": "eng"}
    assert server.requests[0].body["response_format"]["json_schema"]["name"] == "person"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Alice", "age": "old", "occupation": "x"}',
        '{"name": "Alice"}',
        "not json at all {{{",
    ],
)
async def test_schema_violations(tmp_path: Path, text: str) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await run(tmp_path, [Reply(text=text)])
    assert info.value.code == "json_schema_violation"
    assert info.value.details["text"] == text


async def test_empty_json_reply_is_no_response(tmp_path: Path) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await run(tmp_path, [Reply(text="")])
    assert info.value.code == "no_response"


@settings(max_examples=30, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "name": st.text(max_size=20),
            "age": st.integers(0, 200),
            "occupation": st.text(max_size=20),
        }
    )
)
def test_schema_round_trip_property(data: dict[str, Any]) -> None:
    # what a conforming model writes is exactly what json_data holds
    assert parse_structured(json.dumps(data), PERSON).data == data


async def _stream(
    tmp_path: Path, replies: list[Reply], **kw: Any
) -> tuple[list[Any], Any, ScriptedServer]:
    async with ScriptedServer(replies) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            stream = context(tk).generate_task_stream(ASK, **kw)
            events = [e async for e in stream]
            result = await stream.result()
        finally:
            await tk.close()
    return events, result, server


async def test_stream_text_and_reasoning_end_in_the_result(tmp_path: Path) -> None:
    events, result, server = await _stream(
        tmp_path, [Reply(text="Hello, world!", reasoning="think")]
    )
    assert server.requests[0].body["stream"] is True
    texts = [e.text for e in events if isinstance(e, TaskTextDelta)]
    assert texts == ["Hello, ", "world!"]
    assert [e.text for e in events if isinstance(e, TaskReasoningDelta)] == ["think"]
    assert isinstance(events[-1], TaskDone) and events[-1].result is result
    assert result.assistant_text == "Hello, world!"


async def test_stream_hides_the_prompt_protocol_payload(tmp_path: Path) -> None:
    trigger = "<Function_Zz99_Start/>"
    text = (
        f"Checking. {trigger}\n<function_calls>\n<function_call>\n<tool>t</tool>\n"
        "<args_json><![CDATA[{}]]></args_json>\n</function_call>\n</function_calls>"
    )
    events, result, _ = await _stream(
        tmp_path,
        [Reply(text=text, chunks=[text[:5], text[5:14], text[14:30], text[30:]])],
        tools=[{"name": "t"}],
        function_call_mode="prompt_xml",
        function_call_options={"trigger_signal": trigger},
    )
    shown = "".join(e.text for e in events if isinstance(e, TaskTextDelta))
    assert shown == "Checking. "
    assert [e.call.name for e in events if isinstance(e, TaskToolCallEvent)] == ["t"]
    assert [c.name for c in result.tool_calls] == ["t"]


async def test_stream_error_is_the_same_instance_on_both_sides(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="one two three", break_after=1)]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            stream = context(tk).generate_task_stream(ASK)
            seen: list[Any] = []
            with pytest.raises(GenerateTaskError) as from_iter:
                async for event in stream:
                    seen.append(event)
            with pytest.raises(GenerateTaskError) as from_result:
                await stream.result()
        finally:
            await tk.close()
    assert from_iter.value is from_result.value
    assert from_iter.value.details["delivered_text"] == "one "
    assert [e.text for e in seen] == ["one "]


async def test_stop_generation_and_streaming_processor(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="slow", delay=5)]) as server:
        tk, chat_id = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")], chat=[])
        try:
            ctx = context(tk, chat_id)
            other = context(tk)  # another chat's context must not stop this one
            assert ctx.streaming_processor is None and not ctx.stop_generation()
            task = asyncio.ensure_future(ctx.generate_task(ASK))
            for _ in range(100):
                if ctx.streaming_processor is not None:
                    break
                await asyncio.sleep(0.02)
            processor = ctx.streaming_processor
            assert processor is not None and processor.state == "streaming"
            assert processor.model == "scripted-model"
            assert not other.stop_generation()
            assert ctx.stop_generation()
            with pytest.raises(GenerateTaskError) as info:
                await asyncio.wait_for(task, 2)
            assert ctx.streaming_processor is None
        finally:
            await tk.close()
    assert info.value.code == "aborted" and processor.state == "aborted"


async def test_stream_uses_preset_flag_for_plain_generate_task(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="a b")]) as server:
        tk, _ = await setup_tavern(
            tmp_path,
            [profile(server.base_url + "/v1")],
            preset=ChatCompletionPreset.create(stream_openai=True),
        )
        try:
            result = await context(tk).generate_task(ASK)
        finally:
            await tk.close()
    assert server.requests[0].body["stream"] is True and result.assistant_text == "a b"
