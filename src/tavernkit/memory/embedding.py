"""Where memory's vectors come from: the offline embedder or an OpenAI-compatible
``/embeddings`` endpoint, behind one async interface.

:class:`TextEmbedder` is what memory calls (``await embed_many(texts)``: one normalized
float32 row per text). :class:`LocalEmbedder` runs a :class:`~tavernkit.embed.Embedder` (the
MiniLM one by default) on a worker thread; :class:`EndpointEmbedder` POSTs
``{"input": [...], "model": ...}`` to ``<base_url>/embeddings`` as SillyTavern's server does
for its OpenAI-compatible sources, in batches, and checks that the answer has one vector per
text, all of one size. ``name`` identifies the vector space (vectors of different names are
never compared: a stored collection is kept per name, as SillyTavern keeps one index folder
per model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx2

from tavernkit.embed.minilm import MiniLMEmbedder, embed_async
from tavernkit.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from tavernkit.embed.protocol import Embedder

__all__ = ["EndpointEmbedder", "LocalEmbedder", "TextEmbedder"]


@runtime_checkable
class TextEmbedder(Protocol):
    """An async batch embedder (see the module docstring)."""

    @property
    def name(self) -> str: ...

    async def embed_many(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


class LocalEmbedder:
    """A synchronous :class:`~tavernkit.embed.Embedder` (default: MiniLM) off the event loop."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder: Embedder = embedder if embedder is not None else MiniLMEmbedder()

    @property
    def name(self) -> str:
        return f"local:{self.embedder.name}"

    async def embed_many(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return await embed_async(self.embedder, list(texts))


class EndpointEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, llama.cpp, Ollama's
    ``/v1``...). ``key`` is sent as a bearer token and never appears in an error."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        key: str | None = None,
        client: httpx2.AsyncClient | None = None,
        batch_size: int = 64,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._key = key
        self._client = client
        self.batch_size = batch_size
        self._headers = dict(headers or {})
        self._timeout = timeout_s

    @property
    def name(self) -> str:
        return f"endpoint:{self.base_url}#{self.model}"

    def __repr__(self) -> str:
        return f"EndpointEmbedder({self.base_url!r}, {self.model!r})"

    async def embed_many(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        own = self._client is None
        client = self._client or httpx2.AsyncClient(timeout=self._timeout)
        try:
            rows: list[NDArray[np.float32]] = []
            for start in range(0, len(texts), self.batch_size):
                rows.append(await self._batch(client, texts[start : start + self.batch_size]))
        finally:
            if own:
                await client.aclose()
        widths = {r.shape[1] for r in rows}
        if len(widths) != 1:
            raise EmbeddingError(f"{self._where()} returned vectors of sizes {sorted(widths)}")
        out = np.concatenate(rows)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        normalized: NDArray[np.float32] = (out / np.clip(norms, 1e-12, None)).astype(np.float32)
        return normalized

    def _where(self) -> str:
        return f"the embeddings endpoint {self.base_url}/embeddings (model {self.model!r})"

    async def _batch(self, client: httpx2.AsyncClient, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        headers = {"content-type": "application/json", **self._headers}
        if self._key:
            headers["authorization"] = f"Bearer {self._key}"
        try:
            response = await client.post(
                f"{self.base_url}/embeddings",
                json={"input": texts, "model": self.model},
                headers=headers,
            )
        except httpx2.HTTPError as exc:
            raise EmbeddingError(f"{self._where()} failed: {type(exc).__name__}") from None
        if response.status_code >= 400:
            raise EmbeddingError(
                f"{self._where()} answered HTTP {response.status_code}",
                status=response.status_code,
            )
        try:
            payload: Any = response.json()
            data = sorted(payload["data"], key=lambda d: int(d.get("index", 0)))
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingError(
                f"{self._where()} did not return OpenAI's embeddings shape"
            ) from None
        if len(vectors) != len(texts) or not vectors or len({len(v) for v in vectors}) != 1:
            raise EmbeddingError(
                f"{self._where()} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return np.asarray(vectors, dtype=np.float32)
