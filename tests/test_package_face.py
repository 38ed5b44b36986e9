"""``import tavernkit`` is light: the public names are imported on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tavernkit


def test_import_tavernkit_loads_neither_the_engines_nor_the_models() -> None:
    code = (
        "import sys, tavernkit\n"
        "heavy = [m for m in ('tavernkit.facade', 'tavernkit.context', 'tavernkit.models', "
        "'tavernkit.generation', 'tavernkit.prompt', 'pydantic', 'httpx2') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_every_public_name_resolves_to_its_defining_module() -> None:
    from tavernkit.facade import Tavern
    from tavernkit.tools.calls import ToolCall

    assert tavernkit.Tavern is Tavern
    assert tavernkit.ToolCall is ToolCall
    for name in tavernkit.__all__:
        assert getattr(tavernkit, name) is not None
    assert set(tavernkit.__all__) <= set(dir(tavernkit))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        tavernkit.NoSuchThing  # noqa: B018
