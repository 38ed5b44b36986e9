"""The real embedded model for tests, or a skip saying what is missing.

Loaded engines are kept for the whole session, one per set of engine options: loading is
cheap, but every test making and freeing its own llama.cpp server costs time, and twice in
many runs freeing one stalled (not reproduced since; see the report of issue 13)."""

from __future__ import annotations

from typing import Any

import pytest

from tavernkit.providers.local_engine import LocalEngine, local_model_missing
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.local_model import find_model_path

_ENGINES: dict[tuple[tuple[str, Any], ...], LocalEngine] = {}


def real_engine(**options: Any) -> LocalEngine:
    """A loaded engine (2,048 tokens per slot unless ``n_ctx`` says otherwise), shared."""
    reason = local_model_missing()
    if reason is not None:
        pytest.skip(reason)
    options.setdefault("n_ctx", 2048)
    key = tuple(sorted(options.items()))
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = LocalEngine(find_model_path(), **options)
        engine.server()
    return engine


def real_provider(*, seed: int | None = None, **options: Any) -> LocalLlamaProvider:
    """A provider on :func:`real_engine` ``(**options)`` with its own ``seed``."""
    return LocalLlamaProvider(engine=real_engine(**options), seed=seed)
