"""The facade's stream frames: each delta chunk the same bytes as the whole chunk's JSON, the
role chunk in the same write as the first piece, usage and ``[DONE]`` at the end."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from tavernkit.errors import GenerateTaskError
from tavernkit.server.openai_facade import Delta, FacadeCompletion
from tavernkit.server.routes.openai import ChunkFrames, _chunks
from tavernkit.server.sse import sse_data


def test_a_delta_chunk_is_the_whole_chunks_json() -> None:
    frames = ChunkFrames("chatcmpl-1", 1700000000, 'profile/q"uote é')
    for delta in ({"content": 'Grüße \n"x"'}, {"reasoning_content": "…"}, {}):
        whole = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": 'profile/q"uote é',
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        assert frames.chunk(delta) == sse_data(whole)


async def _items(
    *items: Delta | FacadeCompletion | Exception,
) -> AsyncIterator[Delta | FacadeCompletion]:
    for item in items:
        if isinstance(item, Exception):
            raise item
        yield item


def _datas(frame: bytes) -> list[str]:
    return [line[6:] for line in frame.decode().split("\n") if line.startswith("data: ")]


async def test_the_role_goes_out_with_the_first_piece_then_one_write_per_piece() -> None:
    items = _items(Delta(text="two"), FacadeCompletion(text="onetwo", usage={"prompt_tokens": 3}))
    writes = [w async for w in _chunks(items, Delta(text="one"), "m", include_usage=True)]
    first = [json.loads(d)["choices"][0]["delta"] for d in _datas(writes[0])]
    assert first == [{"role": "assistant", "content": ""}, {"content": "one"}]
    assert [json.loads(d)["choices"][0]["delta"] for d in _datas(writes[1])] == [{"content": "two"}]
    end = _datas(writes[2])
    finish = json.loads(end[0])
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert finish["usage"] == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
    assert json.loads(end[1])["choices"] == [] and end[2] == "[DONE]"
    assert len(writes) == 3


async def test_an_error_mid_stream_is_a_chunk_of_its_own_before_done() -> None:
    items = _items(GenerateTaskError("rate_limit", "slow down"))
    writes = [w async for w in _chunks(items, Delta(text="one"), "m", include_usage=False)]
    error = json.loads(_datas(writes[-1])[0])
    assert error["choices"] == [] and error["error"]["code"] == "rate_limit"
    assert _datas(writes[-1])[-1] == "[DONE]"
