"""Base classes for the value types.

External formats (cards, lorebooks, presets, chats) are open: they carry fields we do not know
and readers compare files by key order (SillyTavern hashes lorebook entries by their JSON in key
order). :class:`WireModel` therefore

- keeps unknown keys (``extra="allow"``),
- remembers the key order of the mapping it was read from, and writes known and unknown keys
  back in that order (new keys go last),
- writes back only the keys that were present, given or assigned since (``to_wire``), so
  ``model_validate(x).to_wire() == x`` for a well-formed ``x``; ``create(...)`` builds a complete
  new record whose defaults are written too.

Python attribute names are snake_case; the JSON names are kept as aliases where they differ.
A file that spells a key like the attribute (``automation_id`` where SillyTavern writes
``automationId``) fills the field and gets that key back exactly as it was read.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from tavernkit.owner import DEFAULT_OWNER  # where it is defined: importing it is free

__all__ = ["DEFAULT_OWNER", "Number", "ValueModel", "WireModel"]

#: JSON numbers stay ints when they were ints (``100`` must not come back as ``100.0``).
Number = int | float


class ValueModel(BaseModel):
    """A closed value type of our own (settings, profiles): unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_by_name=True)


class WireModel(BaseModel):
    """A value read from or written to an external, open format; see the module docstring."""

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    _key_order: tuple[str, ...] = PrivateAttr(default=())
    #: alias -> attribute name, for fields the input spelled by attribute name
    _spelled: dict[str, str] | None = PrivateAttr(default=None)

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        self._spelled = None  # keyword arguments are Python names, not a file's spelling

    # validation must not route through this __init__ (it would lose ``by_name=False``)
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        obj = handler(data)
        if isinstance(data, dict) and obj is not data:
            obj._key_order = tuple(data)
            aliased = _aliased(cls)
            if aliased and not aliased.keys().isdisjoint(data):  # rare: one C-speed test
                spelled = {a: n for n, a in aliased.items() if n in data and a not in data}
                obj._spelled = spelled or None
        return obj

    @model_serializer(mode="wrap")
    def _dump_in_key_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if self._spelled and isinstance(out, dict):
            out = {self._spelled.get(k, k): v for k, v in out.items()}
        if not self._key_order or not isinstance(out, dict):
            return out
        ordered = {k: out[k] for k in self._key_order if k in out}
        if len(ordered) != len(out):
            ordered.update((k, v) for k, v in out.items() if k not in ordered)
        return ordered

    @classmethod
    def create(cls, **fields: Any) -> Self:
        """A complete new record: every field counts as set, so ``to_wire`` writes the defaults
        too, in declaration order (as SillyTavern writes a record it creates)."""
        obj = cls.model_validate(fields)
        obj._key_order = ()
        obj._spelled = None
        obj.__pydantic_fields_set__.update(type(obj).model_fields)
        return obj

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready mapping in the external format's names and the original key order,
        holding only the keys that were read, given or assigned (see :meth:`create`), or
        written into since (:meth:`_mark_written_defaults`)."""
        self._mark_written_defaults()
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def _mark_written_defaults(self) -> None:
        """Count as set the fields still holding their default that were written into: an
        assignment inside a default sub-model (``message.extra.memory = text`` on a message
        read without ``extra``) or an item put in a default list or dict. pydantic tracks
        assignments to a model's own fields only, so without this ``to_wire`` would drop what
        the caller wrote."""
        fields = type(self).model_fields
        for name in fields.keys() - self.model_fields_set:
            value = getattr(self, name, None)
            if isinstance(value, WireModel):
                value._mark_written_defaults()
                if value.model_fields_set or value.model_extra:
                    self.model_fields_set.add(name)
            elif isinstance(value, (list, dict)) and value:
                factory = fields[name].default_factory
                if factory in (list, dict) or fields[name].default in ([], {}):
                    self.model_fields_set.add(name)


_ALIASED: dict[type[BaseModel], dict[str, str]] = {}


def _aliased(cls: type[BaseModel]) -> dict[str, str]:
    """Attribute -> alias of ``cls``'s fields whose JSON name differs (cached per class)."""
    pairs = _ALIASED.get(cls)
    if pairs is None:
        pairs = {
            name: info.alias
            for name, info in cls.model_fields.items()
            if info.alias and info.alias != name
        }
        _ALIASED[cls] = pairs
    return pairs
