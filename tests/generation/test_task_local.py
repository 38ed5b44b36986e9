"""With no configuration and no network, generate_task(json_schema=S) on the embedded model
returns json_data valid against S (grammar-constrained). Skipped when xllamacpp or the GGUF is
not installed."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from tavernkit import Tavern
from tavernkit.providers.local_engine import local_model_missing

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.mark.skipif(local_model_missing() is not None, reason=str(local_model_missing()))
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
