"""Editing a chat-completion preset the way SillyTavern's prompt manager does.

Every function returns a new :class:`ChatCompletionPreset` (the input is not changed) whose
``to_wire()`` is still SillyTavern's format: edits touch only the prompt entry and the global
(``100001``) order list, unknown keys and key order survive. When the preset has no global list
yet, it is created from the order in force (the legacy ``100000`` list or the defaults).
"""

from __future__ import annotations

import copy
from typing import Any, TypedDict, Unpack

from tavernkit.errors import PresetEditError as PresetEditError
from tavernkit.models.preset import (
    GLOBAL_CHARACTER_ID,
    INJECTION_ABSOLUTE,
    INJECTION_RELATIVE,
    ChatCompletionPreset,
)

__all__ = [
    "NewPromptPlacing",
    "PresetEditError",
    "add_prompt",
    "move_prompt",
    "remove_prompt",
    "set_content",
    "set_enabled",
    "set_injection",
]

_ROLES = ("system", "user", "assistant")


def _wire(preset: ChatCompletionPreset) -> dict[str, Any]:
    return copy.deepcopy(preset.to_wire())


def _order(data: dict[str, Any], preset: ChatCompletionPreset) -> list[dict[str, Any]]:
    lists = data.setdefault("prompt_order", [])
    for entry in lists:
        if str(entry.get("character_id")) == str(GLOBAL_CHARACTER_ID):
            order: list[dict[str, Any]] = entry.setdefault("order", [])
            return order
    created = {
        "character_id": GLOBAL_CHARACTER_ID,
        "order": [item.to_wire() for item in preset.active_order()],
    }
    lists.append(created)
    order_items: list[dict[str, Any]] = created["order"]  # type: ignore[assignment]
    return order_items


def _prompts(data: dict[str, Any], preset: ChatCompletionPreset) -> list[dict[str, Any]]:
    if not data.get("prompts"):
        data["prompts"] = [p.to_wire() for p in preset.effective_prompts()]
    prompts: list[dict[str, Any]] = data["prompts"]
    return prompts


def _find(items: list[dict[str, Any]], identifier: str) -> int:
    for i, item in enumerate(items):
        if item.get("identifier") == identifier:
            return i
    return -1


def _done(data: dict[str, Any]) -> ChatCompletionPreset:
    return ChatCompletionPreset.model_validate(data)


def set_enabled(
    preset: ChatCompletionPreset, identifier: str, enabled: bool
) -> ChatCompletionPreset:
    """Switch a prompt on or off (adding it to the order list when it is not there)."""
    data = _wire(preset)
    if preset.prompt(identifier) is None:
        raise PresetEditError(f"no prompt {identifier!r} in the preset")
    order = _order(data, preset)
    index = _find(order, identifier)
    if index < 0:
        order.append({"identifier": identifier, "enabled": enabled})
    else:
        order[index]["enabled"] = enabled
    return _done(data)


def move_prompt(
    preset: ChatCompletionPreset, identifier: str, position: int
) -> ChatCompletionPreset:
    """Move a prompt to ``position`` in the order list (negative counts from the end)."""
    data = _wire(preset)
    order = _order(data, preset)
    index = _find(order, identifier)
    if index < 0:
        raise PresetEditError(f"{identifier!r} is not in the prompt order")
    item = order.pop(index)
    if position < 0:
        position = len(order) + 1 + position
    order.insert(max(0, min(position, len(order))), item)
    return _done(data)


def set_injection(
    preset: ChatCompletionPreset,
    identifier: str,
    *,
    position: str | None = None,
    depth: int | None = None,
    order: int | None = None,
    role: str | None = None,
    triggers: list[str] | None = None,
) -> ChatCompletionPreset:
    """Set where a prompt goes: ``position`` "relative" or "in_chat", the in-chat depth and
    order, the role, and the generation types that trigger it (empty: all)."""
    data = _wire(preset)
    prompts = _prompts(data, preset)
    index = _find(prompts, identifier)
    if index < 0:
        default = preset.prompt(identifier)
        if default is None:
            raise PresetEditError(f"no prompt {identifier!r} in the preset")
        prompts.append(default.to_wire())
        index = len(prompts) - 1
    prompt = prompts[index]
    if position is not None:
        if position not in ("relative", "in_chat"):
            raise PresetEditError("position must be 'relative' or 'in_chat'")
        prompt["injection_position"] = (
            INJECTION_ABSOLUTE if position == "in_chat" else INJECTION_RELATIVE
        )
    if depth is not None:
        if depth < 0:
            raise PresetEditError("depth must be 0 or more")
        prompt["injection_depth"] = depth
    if order is not None:
        prompt["injection_order"] = order
    if role is not None:
        if role not in _ROLES:
            raise PresetEditError(f"role must be one of {', '.join(_ROLES)}")
        prompt["role"] = role
    if triggers is not None:
        prompt["injection_trigger"] = list(triggers)
    return _done(data)


def set_content(
    preset: ChatCompletionPreset,
    identifier: str,
    *,
    content: str | None = None,
    name: str | None = None,
) -> ChatCompletionPreset:
    """Change a prompt's text or display name (a marker's content is filled at run time, so it
    cannot be set)."""
    data = _wire(preset)
    prompts = _prompts(data, preset)
    index = _find(prompts, identifier)
    if index < 0:
        default = preset.prompt(identifier)
        if default is None:
            raise PresetEditError(f"no prompt {identifier!r} in the preset")
        prompts.append(default.to_wire())
        index = len(prompts) - 1
    prompt = prompts[index]
    if content is not None:
        if prompt.get("marker"):
            raise PresetEditError(f"{identifier!r} is a marker; its content is filled at run time")
        prompt["content"] = content
    if name is not None:
        prompt["name"] = name
    return _done(data)


class NewPromptPlacing(TypedDict, total=False):
    """Where and how :func:`add_prompt` places a new prompt: its ``role`` (system by
    default), in the chat at ``depth`` (``in_chat``) or among the preset's prompts, its
    injection ``order``, whether it starts ``enabled``, and the order entry it follows
    (``after``; none: at the end)."""

    role: str
    in_chat: bool
    depth: int
    order: int
    enabled: bool
    after: str | None


def add_prompt(
    preset: ChatCompletionPreset,
    identifier: str,
    *,
    name: str,
    content: str,
    **placing: Unpack[NewPromptPlacing],
) -> ChatCompletionPreset:
    """Add a custom prompt (SillyTavern's shape for a new one) and place it in the order
    (where and how: :class:`NewPromptPlacing`)."""
    unknown = sorted(set(placing) - set(NewPromptPlacing.__annotations__))
    if unknown:
        raise TypeError(f"add_prompt() got an unexpected keyword argument {unknown[0]!r}")
    role = placing.get("role", "system")
    in_chat, after = placing.get("in_chat", False), placing.get("after")
    if role not in _ROLES:
        raise PresetEditError(f"role must be one of {', '.join(_ROLES)}")
    if preset.prompt(identifier) is not None:
        raise PresetEditError(f"a prompt {identifier!r} already exists")
    data = _wire(preset)
    _prompts(data, preset).append(
        {
            "identifier": identifier,
            "system_prompt": False,
            "enabled": False,
            "marker": False,
            "name": name,
            "role": role,
            "content": content,
            "injection_position": INJECTION_ABSOLUTE if in_chat else INJECTION_RELATIVE,
            "injection_depth": placing.get("depth", 4),
            "injection_order": placing.get("order", 100),
            "injection_trigger": [],
            "forbid_overrides": False,
        }
    )
    order_list = _order(data, preset)
    entry = {"identifier": identifier, "enabled": placing.get("enabled", True)}
    anchor = _find(order_list, after) if after is not None else -1
    if after is not None and anchor < 0:
        raise PresetEditError(f"{after!r} is not in the prompt order")
    order_list.insert(anchor + 1 if anchor >= 0 else len(order_list), entry)
    return _done(data)


def remove_prompt(preset: ChatCompletionPreset, identifier: str) -> ChatCompletionPreset:
    """Delete a custom prompt and its order entries (built-in prompts cannot be deleted)."""
    found = preset.prompt(identifier)
    if found is None:
        raise PresetEditError(f"no prompt {identifier!r} in the preset")
    if found.system_prompt:
        raise PresetEditError(f"{identifier!r} is a built-in prompt; disable it instead")
    data = _wire(preset)
    data["prompts"] = [p for p in data.get("prompts", []) if p.get("identifier") != identifier]
    for entry in data.get("prompt_order", []):
        entry["order"] = [o for o in entry.get("order", []) if o.get("identifier") != identifier]
    return _done(data)
