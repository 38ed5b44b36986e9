"""Property: for both prompt protocols, written calls read back unchanged (write -> read)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.tools import FunctionTool, JsonProtocol, XmlProtocol

from ._fixtures import TRIGGER

# text that stresses both protocols: CDATA terminators, tags, fences, entities, triggers
PIECES = ["]]>", "<", ">", "&", "```", "\n", '"', "\\", "a", "é", "{", "}", TRIGGER, "<think>"]
nasty = st.lists(st.sampled_from([*PIECES, "&amp;"]), max_size=6).map("".join)
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | nasty | st.text(max_size=6)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty, inner, max_size=3),
    max_leaves=8,
)
names = st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True)
calls = st.lists(
    st.tuples(names, st.dictionaries(nasty, values, max_size=4)), min_size=1, max_size=3
)
prose = st.text(alphabet=st.sampled_from(["a", " ", "\n", "<", "`", "é"]), max_size=20)


def tools_for(batch: list[tuple[str, dict]]) -> list[FunctionTool]:
    return [FunctionTool(name=n) for n in dict.fromkeys(n for n, _ in batch)]


@given(calls, prose)
@settings(max_examples=80, deadline=None)
def test_xml_round_trip(batch: list[tuple[str, dict]], before: str) -> None:
    proto = XmlProtocol(TRIGGER)
    parsed = proto.parse(
        before + "\n" + proto.render_calls(batch), tools_for(batch), validate=False
    )
    assert [(c.name, c.args) for c in parsed.calls] == batch


@given(calls, prose)
@settings(max_examples=80, deadline=None)
def test_json_round_trip(batch: list[tuple[str, dict]], before: str) -> None:
    proto = JsonProtocol(TRIGGER)
    parsed = proto.parse(
        before + "\n" + proto.render_calls(batch), tools_for(batch), validate=False
    )
    assert [(c.name, c.args) for c in parsed.calls] == batch


@given(calls)
@settings(max_examples=60, deadline=None)
def test_history_rewrite_round_trip(batch: list[tuple[str, dict]]) -> None:
    history = [
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [
                {"id": f"c{i}", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(batch)
            ],
        }
    ]
    for proto in (XmlProtocol(TRIGGER), JsonProtocol(TRIGGER)):
        text = proto.rewrite_history(history)[0]["content"]
        parsed = proto.parse(text, tools_for(batch), validate=False)
        assert [(c.name, c.args) for c in parsed.calls] == batch
