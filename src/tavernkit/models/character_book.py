"""The lorebook embedded in a character card (``data.character_book``, Character Card V2/V3).

Kept as its own value so a card round-trips exactly; ``tavernkit.formats.lorebooks`` converts it
to and from a SillyTavern world-info book (the field map of SillyTavern's importer and exporter).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tavernkit.models.base import Number, WireModel

__all__ = ["CharacterBook", "CharacterBookEntry"]


class CharacterBookEntry(WireModel):
    """One entry of ``character_book.entries`` (the V2 spec fields; the rest stays in extras)."""

    keys: list[str] = Field(default_factory=list)
    content: str = ""
    extensions: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True
    insertion_order: Number = 100
    case_sensitive: bool | None = None
    name: str | None = None
    priority: Number | None = None
    id: int | str | None = None
    comment: str | None = None
    selective: bool | None = None
    secondary_keys: list[str] | None = None
    constant: bool | None = None
    position: str | None = None
    use_regex: bool | None = None


class CharacterBook(WireModel):
    """``data.character_book`` of a V2/V3 card."""

    name: str | None = None
    description: str | None = None
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)
    entries: list[CharacterBookEntry] = Field(default_factory=list)
