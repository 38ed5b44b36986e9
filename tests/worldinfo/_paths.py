"""Where the shared conformance folder is: ``conformance_root()`` of tests/conftest.py.

Loaded by path, because ``import conftest`` may name another conftest by collection time.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path


@cache
def conformance_root() -> Path:
    path = Path(__file__).resolve().parent.parent / "conftest.py"
    spec = importlib.util.spec_from_file_location("_tavernkit_wi_tests_root_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.conformance_root())


def worldinfo_goldens() -> list[Path]:
    folder = conformance_root() / "st-1.18" / "worldinfo"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []
