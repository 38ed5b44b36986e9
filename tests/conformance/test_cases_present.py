"""The guard against a green run that checked nothing.

A folder named through TAVERNKIT_CONFORMANCE_DIR that holds no cases (a wrong path, an empty
checkout) fails here, where every family module would only show a skip.
"""

from __future__ import annotations

import pytest

from . import cases

ROOT = cases.configured_root()


def test_cases_present() -> None:
    reason = ROOT.absence_reason()
    if reason is not None:
        if ROOT.explicit:
            pytest.fail(reason)
        pytest.skip(reason)
    found = cases.discover_all(ROOT.path)
    assert found, (
        f"no conformance cases under {ROOT.st_dir} "
        "(expected macros.jsonl, worldinfo/*.json or prompts/*.json)"
    )
