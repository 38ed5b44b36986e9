"""A connection profile's own completion preset (``profile add --preset``).

SillyTavern binds a chat-completion preset to a connection profile: selecting the profile
selects its preset. Connection and preset are still resolved apart (brief 000): the profile
says where to send, the preset how to sample, and a per-request ``llm_preset_name`` names
another preset without touching the connection. So the order is: ``llm_preset_name`` when
given, else the profile's own preset, else the globally selected one.

Only the chat-completion family reads a chat preset; a text profile's binding is ignored here
(its samplers come from the text-generation preset).
"""

from __future__ import annotations

from tavernkit.errors import ChatTurnError, NotFound
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.regex_script import embedded_scripts
from tavernkit.models.state import ChatState
from tavernkit.store.protocol import Store

__all__ = ["load_bound_preset", "with_profile_preset"]


async def load_bound_preset(
    store: Store, connection: ResolvedConnection, *, owner: str
) -> ChatCompletionPreset | None:
    """The preset bound to ``connection``'s profile; ``None`` when it binds none (or is not
    of the chat family). A binding to a preset that is not stored is an ``invalid_input``
    error naming the profile and the preset (never a silent fall back to another preset)."""
    name = connection.profile.chat_preset
    if not name or connection.family != "chat":
        return None
    try:
        preset = await store.get("chat_preset", name, owner=owner)
    except NotFound:
        raise ChatTurnError(
            "invalid_input",
            f"connection profile {connection.profile.name!r} binds chat-completion preset "
            f"{name!r}, which is not stored",
            details={"field": "chat_preset", "profile": connection.profile.name, "value": name},
        ) from None
    if not isinstance(preset, ChatCompletionPreset):
        raise ChatTurnError(
            "invalid_input",
            f"{name!r} is not a chat-completion preset",
            details={"field": "chat_preset", "profile": connection.profile.name, "value": name},
        )
    return preset


async def with_profile_preset(
    store: Store, state: ChatState, connection: ResolvedConnection, *, owner: str
) -> ChatState:
    """``state`` with its chat preset replaced by the profile's own, when it binds one."""
    preset = await load_bound_preset(store, connection, owner=owner)
    if preset is None:
        return state
    update: dict[str, object] = {"chat_preset": preset, "chat_preset_id": None}
    if embedded_scripts((preset.model_extra or {}).get("extensions")):
        # its regex scripts run when the preset is allowed: the allow list names record ids
        name = connection.profile.chat_preset or ""
        update["chat_preset_id"] = (
            await store.get_shared_record("chat_preset", name, owner=owner)
        ).id
    return state.model_copy(update=update)
