"""What an import reports: one :class:`ImportResult` per record it wrote (a card with a book
writes two), with its :data:`Status`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ImportResult", "Status"]

#: ``linked``: a chat imported before its character, attached to it when the character came
Status = Literal["imported", "unchanged", "replaced", "kept", "linked"]


@dataclass(frozen=True, slots=True)
class ImportResult:
    """One record an import wrote (a card with a book writes two)."""

    kind: str
    name: str
    id: str
    status: Status
    source: str
    note: str = ""
