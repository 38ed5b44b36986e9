"""Characters: the ``data`` of a character card (V1/V2/V3) and the card envelope around it.

A card file is an envelope (``spec``, ``spec_version``, ``data`` and, in the files SillyTavern
writes, V1 top-level copies of the main ``data`` fields plus private fields such as ``chat`` and
``create_date``). :class:`Card` keeps that envelope losslessly, so a card read from a file and
written back keeps every field and the key order; :class:`Character` is the ``data`` object,
the V3 superset of the V1 and V2 fields, which the rest of tavernkit uses.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, ValidationError

from tavernkit.models.base import Number, WireModel
from tavernkit.models.character_book import CharacterBook

__all__ = [
    "DEFAULT_TALKATIVENESS",
    "Card",
    "Character",
    "CharacterAsset",
    "DepthPrompt",
]

#: SillyTavern's group-chat talkativeness when a card carries none.
DEFAULT_TALKATIVENESS = 0.5


class DepthPrompt(WireModel):
    """``data.extensions.depth_prompt``: the character's note inserted at a chat depth."""

    prompt: str = ""
    depth: int = 4
    role: str = "system"


class CharacterAsset(WireModel):
    """One entry of ``data.assets`` (V3): ``uri`` is ``embeded://path`` inside a CHARX, a URL,
    or ``ccdefault:`` (the format's default, e.g. the PNG image itself for the main icon)."""

    type: str = ""
    uri: str = ""
    name: str = ""
    ext: str = ""


class Character(WireModel):
    """The ``data`` object of a character card (the V3 superset of V1 and V2).

    The V1 fields are plain strings; fields that only V2/V3 define, and which real-world
    exporters sometimes write as ``null`` or as numbers, are typed tolerantly so those files
    still read and write back unchanged.
    """

    name: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str | None = ""
    system_prompt: str | None = ""
    post_history_instructions: str | None = ""
    alternate_greetings: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    creator: str | None = ""
    character_version: str | Number | None = ""
    extensions: dict[str, Any] = Field(default_factory=dict)
    character_book: CharacterBook | None = None
    group_only_greetings: list[str] = Field(default_factory=list)
    assets: list[CharacterAsset] | None = None
    nickname: str | None = None
    creator_notes_multilingual: dict[str, str] | None = None
    source: list[str] | None = None
    creation_date: Number | None = None
    modification_date: Number | None = None

    @classmethod
    def create(cls, **fields: Any) -> Self:
        """A complete new character; the optional V3 fields left at ``None`` are not written
        (a new card says nothing about them rather than carrying ``null``)."""
        obj = super().create(**fields)
        unset = {n for n in type(obj).model_fields if n not in fields and getattr(obj, n) is None}
        obj.__pydantic_fields_set__.difference_update(unset)
        return obj

    @property
    def depth_prompt(self) -> DepthPrompt | None:
        """The typed depth prompt, or ``None`` when the card has none or it is malformed (a
        convenience reader: the raw value stays in ``extensions`` either way)."""
        raw = self.extensions.get("depth_prompt")
        if not isinstance(raw, dict):
            return None
        try:
            return DepthPrompt.model_validate(raw)
        except ValidationError:
            return None

    @property
    def world(self) -> str | None:
        """The name of the lorebook linked to this character (``extensions.world``)."""
        raw = self.extensions.get("world")
        return raw if isinstance(raw, str) and raw else None

    @property
    def talkativeness(self) -> float:
        """Group-chat talkativeness in 0..1; SillyTavern stores it as a number or a string."""
        raw = self.extensions.get("talkativeness", DEFAULT_TALKATIVENESS)
        if isinstance(raw, bool):
            return DEFAULT_TALKATIVENESS
        try:
            value = float(raw)
        except (TypeError, ValueError):
            return DEFAULT_TALKATIVENESS
        return value if 0.0 <= value <= 1.0 else DEFAULT_TALKATIVENESS


class Card(WireModel):
    """A card file's top level: ``spec``, ``spec_version``, ``data`` and everything else it
    carried (V1 duplicates, ``avatar``, ``chat``, ``create_date``...) kept as extras in order.

    ``spec`` is ``None`` for a card read from a V1 or foreign file; the writers in
    :mod:`tavernkit.formats.cards` set it and refresh the V1 duplicates from ``data``.
    """

    spec: str | None = None
    spec_version: str | None = None
    data: Character = Field(default_factory=Character)

    @classmethod
    def create(cls, **fields: Any) -> Self:
        """A new card; a ``spec`` left unset is not written as ``null``."""
        obj = super().create(**fields)
        unset = {n for n in type(obj).model_fields if n not in fields and getattr(obj, n) is None}
        obj.__pydantic_fields_set__.difference_update(unset)
        return obj

    @property
    def character(self) -> Character:
        return self.data
