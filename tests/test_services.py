"""The real-server fixtures' rule for a missing binary: a skip that says what to install
outside CI, a failure in CI (tests/_services.py)."""

from __future__ import annotations

import pytest

from _services import start_postgres, start_redis


def test_outside_ci_a_missing_server_is_a_skip_naming_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with (
        pytest.raises(pytest.skip.Exception, match=r"apt-get install -y redis-server"),
        start_redis(),
    ):
        pass


def test_in_ci_a_missing_server_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match=r"CI needs redis-server"), start_redis():
        pass
    monkeypatch.setattr("_services._pg_bin", lambda: None)
    with (
        pytest.raises(pytest.fail.Exception, match=r"apt-get install -y postgresql"),
        start_postgres(),
    ):
        pass
