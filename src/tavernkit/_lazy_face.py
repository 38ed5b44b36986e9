"""Package faces whose names are imported on first use (``tavernkit``, ``tavernkit.generation``).

A face lists what its package offers; importing the face must not import the whole package (a
caller that needs ``AbortController`` does not pay for the turn runner). :func:`lazy_face`
gives a package the module ``__getattr__`` and ``__dir__`` that do this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(
    package: str,
    namespace: dict[str, Any],
    names: Mapping[str, str],
    *,
    module_name: str | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose ``namespace`` is its globals and
    ``names`` maps each lazy name to the module defining it. A resolved name is stored in the
    namespace (the next read is a plain attribute). With ``module_name``, a resolved name's
    ``__module__`` is rewritten to it (as httpx shows ``httpx.Client``)."""

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        if module_name is not None:
            value.__module__ = module_name
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *names})

    return getattr_, dir_
