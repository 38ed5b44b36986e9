"""Personas: who the user plays as (SillyTavern's ``power_user.personas`` and
``power_user.persona_descriptions`` in settings.json, keyed by the avatar file name)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from pydantic import ValidationError

from tavernkit.errors import FormatError
from tavernkit.models.base import WireModel

__all__ = ["Persona", "PersonaPosition", "personas_from_st_settings"]


class PersonaPosition(IntEnum):
    """Where the persona description goes (SillyTavern's ``persona_description_positions``)."""

    IN_PROMPT = 0
    #: Legacy: SillyTavern migrates it to IN_PROMPT; kept so old settings still read.
    AFTER_CHAR = 1
    TOP_AN = 2
    BOTTOM_AN = 3
    AT_DEPTH = 4
    NONE = 9


class Persona(WireModel):
    """One persona. ``position`` and ``role`` stay plain ints (an unknown future value must
    survive a round trip); compare them with :class:`PersonaPosition` members."""

    avatar: str = ""
    name: str = ""
    description: str = ""
    title: str = ""
    position: int = PersonaPosition.IN_PROMPT
    depth: int = 2
    #: Chat role of an AT_DEPTH insertion: 0 system, 1 user, 2 assistant.
    role: int = 0
    #: The name of the lorebook bound to this persona (``persona_description_lorebook``).
    lorebook: str | None = None


def personas_from_st_settings(
    settings: dict[str, Any], *, source: str = "settings.json"
) -> list[Persona]:
    """The personas of a SillyTavern settings.json, in the order of ``power_user.personas``.

    A description without an entry in ``personas`` belongs to a deleted avatar and is skipped,
    as SillyTavern's persona list does; an empty lorebook name means none.
    """
    if not isinstance(settings, dict):
        raise FormatError("settings must be a JSON object", source=source)
    power_user = settings.get("power_user", {})
    if not isinstance(power_user, dict):
        raise FormatError("must be an object", source=source, field="power_user")
    names = power_user.get("personas") or {}
    descriptions = power_user.get("persona_descriptions") or {}
    if not isinstance(names, dict):
        raise FormatError("must be an object", source=source, field="power_user.personas")
    if not isinstance(descriptions, dict):
        raise FormatError(
            "must be an object", source=source, field="power_user.persona_descriptions"
        )
    out: list[Persona] = []
    for avatar, name in names.items():
        field = f"power_user.persona_descriptions.{avatar}"
        desc = descriptions.get(avatar) or {}
        if not isinstance(desc, dict):
            raise FormatError("must be an object", source=source, field=field)
        record: dict[str, Any] = {"avatar": avatar, "name": name}
        record.update((k, v) for k, v in desc.items() if k not in record)
        if record.get("lorebook") == "":
            record["lorebook"] = None
        try:
            out.append(Persona.model_validate(record))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise FormatError(err["msg"], source=source, field=f"{field}.{loc}") from exc
    return out
