"""The group goldens (``st-1.18/groups``) for the group tests; skip when the folder is absent."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

_REPO = Path(__file__).resolve().parents[2]


def groups_dir() -> Path:
    """``conformance_root()`` of tests/conftest.py, then ``st-1.18/groups``."""
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    root = Path(env) if env else _REPO.parent / "shared" / "conformance"
    return root / "st-1.18" / "groups"


def golden(case_id: str) -> dict[str, Any]:
    path = groups_dir() / f"{case_id}.json"
    if not path.is_file():
        pytest.skip(f"group golden {case_id} not found under {groups_dir()}")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def with_files() -> list[str]:
    """The cases that carry ``st_group_file`` and ``st_group_chat_jsonl`` (the oracle)."""
    folder = groups_dir()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("st_group_file") and data.get("st_group_chat_jsonl"):
            out.append(path.stem)
    return out
