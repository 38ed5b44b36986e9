"""With no configuration and no network, generate_task(json_schema=S) on the embedded model
returns json_data valid against S (grammar-constrained, fixed seed). Skipped when llama_cpp or
the GGUF is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from tavernkit import Tavern
from tavernkit.providers.local_model import find_model_path

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def _available() -> bool:
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        return find_model_path() is not None
    except Exception:
        return False


@pytest.mark.skipif(not _available(), reason="llama_cpp or the local GGUF is not installed")
async def test_embedded_model_json_schema(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        result = await tk.context().generate_task(
            [
                {"role": "system", "content": "Extract the person as JSON."},
                {"role": "user", "content": "Alice is 32 years old."},
            ],
            json_schema=SCHEMA,
        )
    Draft202012Validator(SCHEMA).validate(result.json_data)
