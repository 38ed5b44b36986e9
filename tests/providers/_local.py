"""The real embedded model for tests, or a skip saying what is missing."""

from __future__ import annotations

from typing import Any

import pytest

from tavernkit.providers.local_engine import local_model_missing
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.local_model import find_model_path


def real_provider(**options: Any) -> LocalLlamaProvider:
    """A loaded SmolLM2 provider (2,048 tokens per slot unless ``n_ctx`` says otherwise)."""
    reason = local_model_missing()
    if reason is not None:
        pytest.skip(reason)
    options.setdefault("n_ctx", 2048)
    provider = LocalLlamaProvider(model_path=find_model_path(), **options)
    provider.load()
    return provider
