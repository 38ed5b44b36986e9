"""Reading and changing an owner's settings by section and key, as ``tavernkit settings`` and
the server's ``/settings`` routes do: world info (scan depth, budget, recursion, the global
lorebooks...), the prompt (context size, response length, instruct mode...), reasoning
(auto-parse, template...) and the compatibility mode. (Memory has its own routes and command,
:mod:`tavernkit.assist.memory_settings`, on the same rules.)

A change names only the keys it sets: ``{"world_info": {"depth": 4}, "compat": "st-1.18"}``.
A key is accepted by its field name or its alias; a section or key that does not exist, a
value of the wrong type or out of range, or a global lorebook that is not stored is a
:class:`~tavernkit.errors.FormatError` naming ``section.key`` (the value itself is never
echoed), and nothing is stored then. The selections (character, persona, preset, profile)
have their own calls, and a character's extra lorebooks are the character's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from tavernkit.errors import FormatError, NotFound
from tavernkit.models.settings import (
    Compat,
    PromptSettings,
    ReasoningSettings,
    Settings,
    WorldInfoSettings,
)
from tavernkit.runtime import Runtime

__all__ = ["SETTINGS_SECTIONS", "merge_section", "settings_view", "update_settings"]

#: the sections this editor changes, and their models
SETTINGS_SECTIONS: dict[str, type[BaseModel]] = {
    "world_info": WorldInfoSettings,
    "prompt": PromptSettings,
    "reasoning": ReasoningSettings,
}
#: keys set elsewhere: a character's extra books are the character's
_LOCKED = {("world_info", "char_lore")}
#: SillyTavern's ranges for the numbers a typo could make absurd: (least, most or None)
_RANGES: dict[tuple[str, str], tuple[int, int | None]] = {
    ("world_info", "depth"): (0, 1000),
    ("world_info", "budget"): (1, 100),
    ("world_info", "budget_cap"): (0, None),
    ("world_info", "min_activations"): (0, None),
    ("world_info", "min_activations_depth_max"): (0, None),
    ("world_info", "max_recursion_steps"): (0, None),
    ("prompt", "max_context"): (1, None),
    ("prompt", "amount_gen"): (1, None),
    ("reasoning", "max_additions"): (0, None),
}
_COMPAT: tuple[str, ...] = get_args(Compat)


def settings_view(settings: Settings) -> dict[str, Any]:
    """What the editor shows: its sections (field names) and ``compat``."""
    view: dict[str, Any] = {
        name: getattr(settings, name).model_dump(mode="json") for name in SETTINGS_SECTIONS
    }
    view["world_info"].pop("char_lore", None)
    view["compat"] = settings.compat
    return view


def _keys(model: type[BaseModel]) -> dict[str, str]:
    """Every name a key of ``model`` is accepted by (its field name and its alias) -> the
    field name."""
    names: dict[str, str] = {}
    for name, info in model.model_fields.items():
        names[name] = name
        if info.alias:
            names[info.alias] = name
    return names


def merge_section(
    section: str,
    model: type[BaseModel],
    current: BaseModel,
    values: Mapping[str, Any],
    *,
    locked: frozenset[str] = frozenset(),
) -> BaseModel:
    """``current`` with ``values`` set (keys by field name or alias), validated; a
    :class:`FormatError` naming ``section.key`` otherwise."""
    known = _keys(model)
    merged = current.model_dump()
    for key, value in values.items():
        name = known.get(key)
        if name is None or name in locked:
            raise FormatError(f"{section} has no setting {key!r}", field=f"{section}.{key}")
        merged[name] = value
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        # the value itself is not echoed: a template may be long, a URL may carry a token
        raise FormatError(
            f"{section}.{where}: {first['msg']}", field=f"{section}.{where}"
        ) from None


def _check_ranges(section: str, model: BaseModel) -> None:
    for (owner, key), (least, most) in _RANGES.items():
        if owner != section:
            continue
        value = getattr(model, key)
        if value < least or (most is not None and value > most):
            rule = f"{least} or more" if most is None else f"{least} to {most}"
            raise FormatError(f"{section}.{key} must be {rule}", field=f"{section}.{key}")


async def _check_books(runtime: Runtime, names: list[str]) -> None:
    for name in names:
        try:
            await runtime.store.get_record("lorebook", name, owner=runtime.owner)
        except NotFound:
            raise FormatError(
                f"world_info.global_books: no lorebook named {name!r}",
                field="world_info.global_books",
            ) from None


async def update_settings(runtime: Runtime, changes: Mapping[str, Any]) -> Settings:
    """Set the keys ``changes`` names (see the module docstring) and store the result in one
    write; returns the settings as stored."""
    settings = await runtime.settings()
    update: dict[str, Any] = {}
    for section, values in changes.items():
        if section == "compat":
            if values not in _COMPAT:
                raise FormatError(f"compat must be one of {', '.join(_COMPAT)}", field="compat")
            update["compat"] = values
            continue
        model = SETTINGS_SECTIONS.get(section)
        if model is None:
            sections = ", ".join([*SETTINGS_SECTIONS, "compat"])
            raise FormatError(f"no settings section {section!r} (one of {sections})", field=section)
        if not isinstance(values, Mapping):
            raise FormatError(f"{section} takes keys and values", field=section)
        locked = frozenset(key for owner, key in _LOCKED if owner == section)
        merged = merge_section(section, model, getattr(settings, section), values, locked=locked)
        _check_ranges(section, merged)
        update[section] = merged
    books = update.get("world_info")
    if isinstance(books, WorldInfoSettings):
        books.global_books = list(dict.fromkeys(books.global_books))  # each book once
        await _check_books(runtime, books.global_books)
    settings = settings.model_copy(update=update)
    await runtime.store.put_settings(settings, owner=runtime.owner)
    return settings
