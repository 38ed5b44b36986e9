"""Property tests: any message JSON survives the row split, and any chat survives the store."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.store import open_store
from tavernkit.store._message_rows import join_message, split_message

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
texts = st.text(max_size=20)  # includes lone surrogates: they must survive too


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """Message-shaped dicts, in a random key order, some of them malformed on purpose."""
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["mes"] = draw(texts | json_values)
    if draw(st.booleans()):
        fields["swipes"] = draw(st.lists(texts, max_size=4) | json_values)
    if draw(st.booleans()):
        fields["swipe_info"] = draw(
            st.lists(
                st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=2),
                max_size=4,
            )
            | json_values
        )
    if draw(st.booleans()):
        fields["swipe_id"] = draw(st.integers(0, 4))
    extra = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
    fields.update({k: v for k, v in extra.items() if k not in fields})
    keys = draw(st.permutations(list(fields)))
    return {k: fields[k] for k in keys}


@given(messages())
def test_split_then_join_is_identity(message: dict[str, Any]) -> None:
    split = split_message(message)
    # The body must be JSON UTF-8 can store, whatever the text held.
    split.body_json.encode("utf-8")
    joined = join_message(json.loads(split.body_json), split.extracted, split.mes, split.swipes)
    assert joined == message
    assert list(joined) == list(message)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    chat=st.lists(messages(), max_size=6),
    appended=st.lists(messages(), max_size=3),
)
def test_store_round_trip_is_identity(
    header: dict[str, Any], chat: list[dict[str, Any]], appended: list[dict[str, Any]]
) -> None:
    async def run(folder: Path) -> None:
        async with await open_store(folder / "p.db") as store:
            info = await store.create_chat(header, chat, name="prop")
            for m in appended:
                await store.append_message(info.id, m)
            loaded = await store.load_chat(info.id)
            assert loaded.header == header and list(loaded.header) == list(header)
            assert [m.data for m in loaded.messages] == [*chat, *appended]
            assert [list(m.data) for m in loaded.messages] == [list(m) for m in [*chat, *appended]]

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))
