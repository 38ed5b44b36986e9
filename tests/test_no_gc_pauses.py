"""The ``no_gc_pauses`` fixture (tests/conftest.py): the collector is off in the test that
asks for it, and on again after it."""

from __future__ import annotations

import gc

import pytest


@pytest.mark.usefixtures("no_gc_pauses")
def test_the_collector_is_off_in_the_test() -> None:
    assert not gc.isenabled()
    assert gc.collect() >= 0  # an explicit collection still runs


def test_it_is_on_again_after() -> None:  # runs after the one above (file order)
    assert gc.isenabled()
