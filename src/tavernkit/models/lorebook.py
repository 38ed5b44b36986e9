"""Lorebooks (SillyTavern "world info"): a book of entries keyed by uid.

The model is lossless: a book read from a file writes back the same JSON values in the same key
order, with unknown keys kept. Key order is not cosmetic here: SillyTavern keys the timed-effect
state (sticky, cooldown) of an entry by a hash of the entry's JSON in key order, so reordering
keys would forget that state.

Completing entries with their defaults (what SillyTavern's ``addMissingWorldInfoFields`` does when
it loads a book into the editor) is a separate step, :func:`add_missing_fields`, so reading a file
never changes it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Self

from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.jscompat import js_key_order
from tavernkit.models.base import Number, WireModel
from tavernkit.models.character_book import CharacterBook

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_WEIGHT",
    "GENERATION_TYPE_TRIGGERS",
    "MAX_UID",
    "CharacterFilter",
    "ExtensionPromptRole",
    "LoreEntry",
    "Lorebook",
    "SelectiveLogic",
    "WorldInfoPosition",
    "add_missing_fields",
    "entry_template",
    "js_key_order",
]

#: ``DEFAULT_DEPTH``: the @depth insertion depth of a new entry.
DEFAULT_DEPTH = 4
#: ``DEFAULT_WEIGHT``: an entry's weight in its inclusion group's random pick.
DEFAULT_WEIGHT = 100
#: SillyTavern gives up looking for a free uid at this bound.
MAX_UID = 1_000_000
#: The generation types an entry's ``triggers`` may name (empty list = all of them).
GENERATION_TYPE_TRIGGERS = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")


class WorldInfoPosition(IntEnum):
    """Where an activated entry's content goes (``world_info_position``)."""

    BEFORE = 0
    AFTER = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EM_TOP = 5
    EM_BOTTOM = 6
    OUTLET = 7


class SelectiveLogic(IntEnum):
    """How secondary keys combine with the primary match (``world_info_logic``)."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class ExtensionPromptRole(IntEnum):
    """The chat role of an @depth entry (``extension_prompt_roles``); null counts as SYSTEM."""

    SYSTEM = 0
    USER = 1
    ASSISTANT = 2


class _AliasedWireModel(WireModel):
    """A WireModel whose JSON names differ from its attribute names.

    Files are read with ``model_validate(raw, by_name=False)`` (see ``formats.lorebooks``) so a
    stray key spelled like an attribute (``"keys"`` in a world-info entry) stays an unknown key
    instead of filling the field. Pydantic still counts such an extra as a *set field* of that
    name, which would make ``to_wire`` write the field too; this validator undoes that.
    """

    @model_validator(mode="wrap")
    @classmethod
    def _extras_are_not_fields(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        obj = handler(data)
        extra = obj.__pydantic_extra__
        if extra and isinstance(data, Mapping):
            obj.__pydantic_fields_set__.difference_update(
                name
                for name, info in type(obj).model_fields.items()
                if name in extra and (info.alias or name) not in data
            )
        return obj


class CharacterFilter(_AliasedWireModel):
    """Limits an entry to (or excludes it from) characters by avatar base name or tag id."""

    model_config = ConfigDict(alias_generator=to_camel)

    is_exclude: bool = False
    names: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)


class LoreEntry(_AliasedWireModel):
    """One world-info entry. Fields are declared in the order SillyTavern writes a new entry
    (``{uid, ...newWorldInfoEntryTemplate}``, then ``characterFilter`` and ``displayIndex``), so
    :meth:`create` lays keys out as SillyTavern does. Enum-like fields stay plain ints so values
    this version does not know still round-trip; compare them with the IntEnums above."""

    model_config = ConfigDict(alias_generator=to_camel)

    uid: int | str | None = None
    keys: list[str] = Field(default_factory=list, alias="key")
    secondary_keys: list[str] = Field(default_factory=list, alias="keysecondary")
    comment: str | None = ""
    content: str = ""
    constant: bool = False
    vectorized: bool = False
    selective: bool = True
    selective_logic: int = SelectiveLogic.AND_ANY.value
    add_memo: bool = False
    order: Number = 100
    position: int = WorldInfoPosition.BEFORE.value
    disable: bool = False
    ignore_budget: bool = False
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    match_persona_description: bool = False
    match_character_description: bool = False
    match_character_personality: bool = False
    match_character_depth_prompt: bool = False
    match_scenario: bool = False
    match_creator_notes: bool = False
    #: A recursion level; ``true`` counts as level 1. Union order keeps ``false`` a bool.
    delay_until_recursion: bool | int | float = 0
    #: ``null`` after the editor switched ``useProbability`` off.
    probability: Number | None = 100
    use_probability: bool = True
    #: ``null`` when the editor moved the entry off the @depth position.
    depth: Number | None = DEFAULT_DEPTH
    outlet_name: str = ""
    group: str = ""
    group_override: bool = False
    group_weight: Number | None = DEFAULT_WEIGHT
    scan_depth: Number | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    use_group_scoring: bool | None = None
    automation_id: str = ""
    role: int | None = ExtensionPromptRole.SYSTEM.value
    sticky: Number | None = None
    cooldown: Number | None = None
    delay: Number | None = None
    triggers: list[str] = Field(default_factory=list)
    character_filter: CharacterFilter = Field(default_factory=CharacterFilter)
    display_index: Number | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)


#: Fields of ``newWorldInfoEntryTemplate`` (the back-fill set): everything but the uid, the
#: character filter (normalised on its own), the display index and the card extensions.
_TEMPLATE_FIELDS = tuple(
    name
    for name in LoreEntry.model_fields
    if name not in {"uid", "character_filter", "display_index", "extensions"}
)


#: (JSON name, default) of each template field, computed once: pydantic's ``get_default``
#: inspects factory signatures and is far too slow to call per converted entry.
_TEMPLATE_DEFAULTS: tuple[tuple[str, Any], ...] = tuple(
    (
        LoreEntry.model_fields[name].alias or name,
        LoreEntry.model_fields[name].get_default(call_default_factory=True),
    )
    for name in _TEMPLATE_FIELDS
)


def entry_template() -> dict[str, Any]:
    """A fresh copy of SillyTavern's ``newWorldInfoEntryTemplate`` (JSON names, its key order)."""
    return {key: copy.deepcopy(value) for key, value in _TEMPLATE_DEFAULTS}


class Lorebook(_AliasedWireModel):
    """A world-info book: ``{"entries": {"<uid>": entry}, "originalData"?, "name"?, ...}``.

    ``entries`` keeps the file's key order. ``original_data`` is the card ``character_book`` the
    book was imported from (SillyTavern keeps it to export the card again).
    """

    entries: dict[str, LoreEntry] = Field(default_factory=dict)
    original_data: CharacterBook | dict[str, Any] | None = Field(
        default=None, alias="originalData", union_mode="left_to_right"
    )
    name: str | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)

    def entries_in_order(self) -> list[LoreEntry]:
        """Entries in the order SillyTavern iterates them (see :func:`js_key_order`)."""
        return [self.entries[k] for k in js_key_order(self.entries)]

    def free_uid(self) -> int:
        """The lowest unused integer uid, as SillyTavern's ``getFreeWorldEntryUid`` picks it."""
        for uid in range(MAX_UID):
            if str(uid) not in self.entries:
                return uid
        raise LimitExceeded(f"no free uid below {MAX_UID}", field="entries")

    def new_entry(self, **fields: Any) -> LoreEntry:
        """Add a complete new entry (every template field written, as SillyTavern's editor saves
        it) under the lowest free uid and return it. ``displayIndex`` defaults to the uid."""
        if "uid" in fields:
            raise TypeError("new_entry assigns the uid itself")
        uid = self.free_uid()
        has_extensions = "extensions" in fields
        if "display_index" not in fields and "displayIndex" not in fields:
            fields["display_index"] = uid
        entry = LoreEntry.create(uid=uid, **fields)
        if "character_filter" not in fields and "characterFilter" not in fields:
            # ``create`` marks only top-level fields; the nested default must be written whole.
            entry.character_filter = CharacterFilter.create()
        if not has_extensions:
            entry.__pydantic_fields_set__.discard("extensions")
        self.entries[str(uid)] = entry
        # Mutating the dict in place is not an assignment, so mark it for ``to_wire``.
        self.__pydantic_fields_set__.add("entries")
        return entry


def add_missing_fields(
    entry: LoreEntry | Mapping[str, Any], *, source: str = "<entry>", field: str | None = None
) -> LoreEntry:
    """SillyTavern's ``addMissingWorldInfoFields`` for one entry: template fields the entry lacks
    are appended with their defaults, a ``key``/``keysecondary`` that is not a list becomes
    ``[]``, and a ``characterFilter`` that is not an object becomes the empty filter. Keys that
    were present keep their place, so the result hashes as SillyTavern's completed entry does.

    Takes a raw mapping too, so an engine can repair entries the strict model would refuse; any
    other bad value raises :class:`FormatError` naming ``field``.
    """
    raw = entry.to_wire() if isinstance(entry, LoreEntry) else dict(entry)
    for key, value in entry_template().items():
        if key not in raw:
            raw[key] = value
    for key in ("key", "keysecondary"):
        if not isinstance(raw[key], list):
            raw[key] = []
    if not isinstance(raw.get("characterFilter"), dict):
        raw["characterFilter"] = {"isExclude": False, "names": [], "tags": []}
    try:
        return LoreEntry.model_validate(raw, by_name=False)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        path = f"{field}.{loc}" if field else loc
        raise FormatError(err["msg"], source=source, field=path) from None
