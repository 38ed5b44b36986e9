"""Reading and changing an owner's memory settings (``Settings.memory``: Vector Storage's
``vectors`` and Summarize's ``summary``), as the server's ``/memory`` routes and
``tavernkit memory`` do.

A change names only the keys it sets, per section; a key a section does not have, or a value
it does not take, is a :class:`~tavernkit.errors.FormatError` naming ``section.key``, and
nothing is stored then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from tavernkit.assist.settings_edit import merge_section
from tavernkit.errors import FormatError
from tavernkit.models.memory import MemorySettings
from tavernkit.runtime import Runtime

__all__ = ["MEMORY_SECTIONS", "memory_settings", "update_memory_settings"]

#: the sections of ``Settings.memory`` and their models
MEMORY_SECTIONS: dict[str, type[BaseModel]] = {
    name: info.annotation  # type: ignore[misc]
    for name, info in MemorySettings.model_fields.items()
}


async def memory_settings(runtime: Runtime) -> MemorySettings:
    """The owner's memory settings (SillyTavern's defaults until some are stored)."""
    return (await runtime.settings()).memory


async def update_memory_settings(
    runtime: Runtime, changes: Mapping[str, Mapping[str, Any]]
) -> MemorySettings:
    """Set the keys ``changes`` names (``{"vectors": {"enabled_chats": True}}``; Summarize's
    keys by either spelling, ``prompt_interval`` or ``promptInterval``) and store the result;
    returns the settings as stored."""
    settings = await runtime.settings()
    current = settings.memory
    sections: dict[str, Any] = {}
    for section, values in changes.items():
        model = MEMORY_SECTIONS.get(section)
        if model is None:
            raise FormatError(
                f"memory has no section {section!r} (one of {', '.join(MEMORY_SECTIONS)})",
                field=section,
            )
        sections[section] = merge_section(section, model, getattr(current, section), values)
    settings.memory = current.model_copy(update=sections)
    await runtime.store.put_settings(settings, owner=runtime.owner)
    return settings.memory
