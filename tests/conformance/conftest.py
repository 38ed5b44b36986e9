"""Conformance run settings: name the folder in the header so a CI log says what was checked."""

from __future__ import annotations

import pytest

from . import cases
from .chatluna_adapter import discover as discover_chatluna


def pytest_report_header(config: pytest.Config) -> list[str]:
    root = cases.configured_root()
    reason = root.absence_reason()
    if reason is not None:
        return [f"conformance: {reason}"]
    counts = {
        "macros": len(cases.discover_macros(root.path)),
        "worldinfo": len(cases.discover_worldinfo(root.path)),
        "prompts": len(cases.discover_prompts(root.path)),
        "regex": len(cases.discover_regex(root.path)),
        "perf": len(cases.discover_perf(root.path)),
        "chatluna": len(discover_chatluna(root.path)),
    }
    summary = ", ".join(f"{name} {count}" for name, count in counts.items())
    return [f"conformance: {root.path} ({summary})"]
