"""A pytest plugin for .ci/pytest_checked: the session's own accounting, written at its end.

Loaded with ``-p pytest_accounting`` (.ci on the path). It counts the items collected (after
deselection) and the items whose run protocol finished, and writes both with pytest's exit
status to the JSON file named by ``$PYTEST_ACCOUNTING_FILE`` when the session finishes. A
process that ends in the middle of the session (``os._exit``, a signal, an abort) never writes
it: the missing file is the evidence.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_collected: list[int] = []
_finished: set[str] = set()


def pytest_collection_finish(session: pytest.Session) -> None:
    _collected.append(len(session.items))


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _finished.add(nodeid)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get("PYTEST_ACCOUNTING_FILE")
    if not target:
        return
    record = {
        "collected": _collected[-1] if _collected else None,
        "finished": len(_finished),
        "exitstatus": int(exitstatus),
    }
    Path(target).write_text(json.dumps(record), encoding="utf-8")
