"""SillyTavern's ``settings.json``: the prompt-relevant settings, the active templates and the
personas, read in one go (import-only: we never write SillyTavern's settings file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tavernkit.errors import FormatError
from tavernkit.formats.file_io import load_json
from tavernkit.models.persona import Persona, personas_from_st_settings
from tavernkit.models.settings import Settings, settings_from_st
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
    migrate_legacy_instruct,
)

__all__ = ["ImportedSettings", "is_st_settings", "read_st_settings"]

# Keys only the runtime copy of a template carries in settings.json, never a template file.
_RUNTIME_KEYS = (
    "enabled",
    "preset",
    "bind_to_context",
    "auto_parse",
    "add_to_prompts",
    "auto_expand",
    "show_hidden",
    "max_additions",
)


@dataclass(slots=True)
class ImportedSettings:
    """What a settings.json holds: the settings, the templates in force, the personas."""

    settings: Settings
    instruct: InstructTemplate | None = None
    context: ContextTemplate | None = None
    sysprompt: SystemPrompt | None = None
    reasoning: ReasoningTemplate | None = None
    personas: list[Persona] = field(default_factory=list)


def is_st_settings(data: Any) -> bool:
    """True for the shape of SillyTavern's settings.json."""
    return (
        isinstance(data, dict)
        and "power_user" in data
        and ("world_info_settings" in data or "oai_settings" in data or "main_api" in data)
    )


def _template_body(raw: Any, name_key: str) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    body = {k: v for k, v in raw.items() if k not in _RUNTIME_KEYS}
    # The runtime copy names itself by ``preset``; a template file by ``name``.
    if name_key == "preset" and "name" not in body and isinstance(raw.get("preset"), str):
        body["name"] = raw["preset"]
    return body


def read_st_settings(
    data: bytes | str | dict[str, Any], *, source: str = "settings.json"
) -> ImportedSettings:
    """Read SillyTavern's settings.json; raises :class:`FormatError` naming the bad field."""
    raw = data if isinstance(data, dict) else load_json(data, source=source)
    if not is_st_settings(raw):
        raise FormatError("not a SillyTavern settings.json (no power_user)", source=source)
    power = raw["power_user"]
    where = "settings"
    try:
        settings = settings_from_st(raw)
        where = "power_user.instruct"
        instruct_body = _template_body(power.get("instruct"), "preset")
        instruct = (
            InstructTemplate.model_validate(migrate_legacy_instruct(instruct_body))
            if instruct_body
            else None
        )
        where = "power_user.context"
        context_body = _template_body(power.get("context"), "preset")
        context = ContextTemplate.model_validate(context_body) if context_body else None
        where = "power_user.sysprompt"
        sys_body = _template_body(power.get("sysprompt"), "name")
        sysprompt = SystemPrompt.model_validate(sys_body) if sys_body else None
        where = "power_user.reasoning"
        reasoning_body = _template_body(power.get("reasoning"), "name")
        reasoning = ReasoningTemplate.model_validate(reasoning_body) if reasoning_body else None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise FormatError(first["msg"], source=source, field=f"{where}.{loc}".strip(".")) from exc
    return ImportedSettings(
        settings=settings,
        instruct=instruct,
        context=context,
        sysprompt=sysprompt,
        reasoning=reasoning,
        personas=personas_from_st_settings(raw, source=source),
    )
