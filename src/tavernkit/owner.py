"""The owner of every record on a single-user install (the server adds real user ids). A
module of its own, with no imports, so the facade can name it as a default without importing
the models (pydantic and every model class: most of ``from tavernkit import Tavern``'s cost)."""

from __future__ import annotations

__all__ = ["DEFAULT_OWNER"]

DEFAULT_OWNER = "default"
