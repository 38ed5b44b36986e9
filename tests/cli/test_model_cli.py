"""``tavernkit model where`` finds the model through TAVERNKIT_LOCAL_MODEL first."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app


def test_model_where_honours_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "my model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("TAVERNKIT_LOCAL_MODEL", str(model))
    result = CliRunner().invoke(app, ["model", "where"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(model)
