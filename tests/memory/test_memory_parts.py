"""The pure parts of memory: chunking, the vector index, the summary rules, the endpoint
embedder (on the scripted server) and the store's vector rows (a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.mock_embedder import MockEmbedder
from generation._scripted_server import ScriptedServer
from tavernkit.errors import EmbeddingError
from tavernkit.memory.chat_memory import Recall, recall, sync_chat
from tavernkit.memory.collections import VectorCollections
from tavernkit.memory.embedding import EndpointEmbedder
from tavernkit.memory.index import VectorIndex
from tavernkit.memory.summary import latest_summary, summary_due, summary_prompt
from tavernkit.memory.text import query_text, split_recursive
from tavernkit.models.chat import Message, MessageExtra
from tavernkit.models.memory import SummarySettings, VectorSettings
from tavernkit.prompt.state import ExtensionPosition
from tavernkit.store.sqlite import open_store

from .conftest import MISSING


def test_split_recursive_merges_with_the_level_delimiter() -> None:
    text = "one two three.\n\nfour five six seven eight nine ten eleven"
    assert split_recursive(text, 20) == [
        "one two three.",
        "four five six seven",
        "eight nine ten",
        "eleven",
    ]
    assert split_recursive(text, 0) == [text]
    assert split_recursive("abcdef", 4, ("",)) == ["abcd", "ef"]


def test_query_text_is_newest_first_and_skips_empty_messages() -> None:
    messages = [
        Message.new("A", t, is_user=True) for t in ["first", "second\n\n\nline", "", "third"]
    ]
    assert query_text(messages, 2, lambda s: s) == "third\nsecond\nline"


def test_index_orders_by_score_then_insertion_and_removes_by_hash() -> None:
    index = VectorIndex(2)
    rows = np.array([[1, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
    index.add([(10, "a", 0), (20, "b", 1), (30, "c", 2), (40, "d", 3)], rows)
    hits = index.query(np.array([1, 0], dtype=np.float32), 3)
    assert [h.hash for h in hits] == [10, 30, 40]  # ties keep insertion order
    assert hits[2].score == pytest.approx(2**-0.5)
    index.remove([10])
    assert [h.hash for h in index.query(np.array([1, 0], dtype=np.float32), 2)] == [30, 40]
    with pytest.raises(EmbeddingError, match="3 dimensions"):
        index.query(np.zeros(3, dtype=np.float32), 1)
    with pytest.raises(EmbeddingError, match="expected 1 vectors of 2"):
        index.add([(1, "x", 0)], np.zeros((1, 3), dtype=np.float32))


def _chat(*texts: str, memory_at: int | None = None) -> list[Message]:
    out = []
    for i, text in enumerate(texts):
        extra = MessageExtra(memory="old summary") if i == memory_at else None
        out.append(Message.new("A", text, is_user=i % 2 == 0, extra=extra))
    return out


def test_summary_gate_follows_sillytavern() -> None:
    settings = SummarySettings(source="main", promptInterval=3)
    assert not summary_due(_chat("a", "b"), settings)  # shorter than the interval
    assert summary_due(_chat("a", "b", "c"), settings)
    assert not summary_due(_chat("a", "b", "c", "d", memory_at=1), settings)  # 2 since
    words = SummarySettings(source="main", promptInterval=10, promptForceWords=5)
    long_chat = _chat(*["x"] * 8, "one two three four five")
    assert not summary_due(long_chat[:8], words)
    assert not summary_due(long_chat, words.model_copy(update={"prompt_interval": 0}))
    # the words trigger fires only with a non-zero interval, once the chat is long enough
    assert summary_due([*long_chat, *_chat("y")], words)
    assert not summary_due(_chat("a", "b", "c"), SummarySettings(promptInterval=3))  # extras


def test_summary_injection_uses_the_template_and_position() -> None:
    chat = _chat("a", "b", "c", memory_at=1)
    assert latest_summary(chat) == "old summary"
    assert latest_summary(_chat("a", "b", memory_at=1)) == ""  # the last message is ignored
    settings = SummarySettings(position="1", depth=3, role=2, template="<{{summary}} by {{char}}>")
    prompt = summary_prompt(" old summary ", settings, lambda s: s.replace("{{char}}", "Mira"))
    assert prompt is not None
    assert (prompt.value, prompt.position, prompt.depth, prompt.role) == (
        "<old summary by Mira>",
        ExtensionPosition.IN_CHAT,
        3,
        2,
    )
    empty = SummarySettings(template="")
    assert summary_prompt("x", empty, lambda s: s).value == "Summary: x"  # type: ignore[union-attr]


async def test_endpoint_embedder_batches_sends_the_key_and_normalizes() -> None:
    async with ScriptedServer() as server:
        server.embed = lambda text: [float(len(text)), 0.0, 3.0]
        embedder = EndpointEmbedder(server.base_url + "/v1", "e5", key="sk-secret", batch_size=2)
        rows = await embedder.embed_many(["a", "bb", "ccc", "dddd", "e"])
        assert rows.shape == (5, 3)
        assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
        assert rows[3] == pytest.approx(np.array([4, 0, 3]) / 5)
        inputs = [r.body["input"] for r in server.requests]
        assert inputs == [["a", "bb"], ["ccc", "dddd"], ["e"]]
        assert server.requests[0].headers["authorization"] == "Bearer sk-secret"
        server.embed_status = 401
        with pytest.raises(EmbeddingError, match="answered HTTP 401") as caught:
            await embedder.embed_many(["a"])
        assert caught.value.status == 401 and "sk-secret" not in str(caught.value)
        server.embed_status = 200
        server.embed = lambda text: [1.0] * (2 if text == "odd" else 3)
        with pytest.raises(EmbeddingError, match="vectors of sizes"):
            await EndpointEmbedder(server.base_url, "e5", batch_size=1).embed_many(["a", "odd"])


class _Counting:
    """A deterministic embedder over the words of a text (the store test is about rows)."""

    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed_many(self, texts: list[str]) -> np.ndarray:  # type: ignore[type-arg]
        self.texts.extend(texts)
        return np.array([[len(t), t.count("a") + 1.0] for t in texts], dtype=np.float32)


async def test_vectors_persist_and_only_changed_texts_are_embedded(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    items = [(1, "alpha", 0), (2, "banana", 1), (2, "banana part two", 1)]
    async with await open_store(path) as store:
        first = _Counting()
        await VectorCollections(first, rows=store).sync("chat:x", items)
        assert first.texts == ["alpha", "banana", "banana part two"]
    async with await open_store(path) as store:
        again = _Counting()
        collections = VectorCollections(again, rows=store)
        assert await collections.hashes("chat:x") == {1, 2}
        assert await collections.sync("chat:x", items) == (0, 0)
        assert again.texts == []
        # message 2 was edited: its new text has a new hash; the old one goes
        assert await collections.sync("chat:x", [items[0], (3, "cabana", 1)]) == (1, 1)
        assert again.texts == ["cabana"]
        hits = await collections.query("chat:x", "cabana", 5)
        assert {h.hash for h in hits} == {1, 3}
        loaded, vectors = await store.load_vectors("chat:x", "counting")
        assert [i[:2] for i in loaded] == [(1, "alpha"), (3, "cabana")]
        assert vectors is not None and vectors.dtype == np.float32
        await store.purge_vectors("chat:x")
        assert (await store.load_vectors("chat:x", "counting"))[1] is None


@pytest.mark.skipif(bool(MISSING), reason="the embed extra is not installed")
def test_local_embedder_name_names_the_model() -> None:
    from tavernkit.memory.embedding import LocalEmbedder

    assert LocalEmbedder().name == "local:all-MiniLM-L6-v2-onnx-int8"


async def _recall(compat: bool, **settings: object) -> Recall:
    texts = ["red apple pie", "green apple tart", "blue boat", "grey stone", "black cat", "q"]
    chat = [Message.new("A", t, is_user=True) for t in texts]
    fields: dict[str, object] = {"protect": 1, "insert": 2, "query": 1, **settings}
    vectors = VectorSettings.model_validate({"enabled_chats": True, **fields})
    collections = VectorCollections(MockEmbedder())
    await sync_chat(collections, "c", chat[:-1], vectors, lambda s: s)
    chat[-1] = Message.new("A", "apple", is_user=True)
    return await recall(chat, vectors, collections, "c", lambda s: s, compat=compat)


async def test_recall_keeps_sillytavern_quirks_only_in_compat() -> None:
    quirky = await _recall(True)
    # the two apple messages are adjacent: SillyTavern's removal skips the second one, so it
    # stays in the history and is injected too
    assert [m.text for m in quirky.recalled] == ["green apple tart", "red apple pie"]
    assert [m.text for m in quirky.messages][:2] == ["green apple tart", "blue boat"]
    fixed = await _recall(False)
    assert [m.text for m in fixed.messages][:2] == ["blue boat", "grey stone"]
    assert fixed.prompt is not None
    assert fixed.prompt.value == "Past events:\nA: green apple tart\n\nA: red apple pie"
    # the score threshold: ignored by SillyTavern's chat path, applied otherwise
    assert (await _recall(True, score_threshold=0.99)).prompt is not None
    assert (await _recall(False, score_threshold=0.99)).prompt is None
    # protect 0 retains the whole chat in SillyTavern (slice(-0)), none otherwise
    assert (await _recall(True, protect=0)).prompt is None
    assert (await _recall(False, protect=0)).recalled
