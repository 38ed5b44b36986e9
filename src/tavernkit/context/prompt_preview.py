"""The prompt preview of the plugin context (:class:`~.tavern_context.TavernContext`): a
dry-run world-info scan of the context's books (``resolve_world_info_for_messages``) and the
messages ``generate_task`` would send (``build_preset_aware_prompt_messages``), neither sent
nor stored. Like the request API, it depends on :class:`~.port.RequestPort`, not on the
context class."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from tavernkit.context.port import RequestPort
from tavernkit.errors import GenerateTaskError
from tavernkit.tasks import prompt as tp
from tavernkit.tasks.run import world_info_from_mapping
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = ["build_preset_aware_prompt_messages", "resolve_world_info_for_messages"]


async def resolve_world_info_for_messages(
    context: RequestPort,
    messages: Sequence[Mapping[str, Any]],
    rng: random.Random,
    *,
    trigger: str = "quiet",
    fallback_to_current_chat: bool = False,
) -> WorldInfoResult:
    """A dry-run world-info scan of the context's books against ``messages`` (or the chat,
    when ``messages`` is empty and ``fallback_to_current_chat``), triggered as ``trigger``."""
    state = await context.chat_state()
    connection = await context.resolve_named("")
    pstate = tp.connection_prompt_state(state, connection, state.chat_preset)
    scan_messages: Sequence[Mapping[str, Any]] | None = tp.validate_task_messages(messages)
    if not messages and fallback_to_current_chat:
        if state.chat is None:
            raise GenerateTaskError(
                "invalid_input",
                "fallback_to_current_chat needs a chat: open the context with a chat_id",
                details={"field": "fallback_to_current_chat"},
            )
        scan_messages = None
    return tp.scan_task_world_info(
        state,
        pstate,
        scan_messages,
        trigger=trigger,
        substitute=tp.make_substitute(
            pstate, None, state.compat, state, context.runtime.prompt_renderer
        ),
        rng=rng,
        compat=state.compat,
    )


async def build_preset_aware_prompt_messages(
    context: RequestPort,
    messages: Sequence[Mapping[str, Any]],
    *,
    include_character_card: bool = True,
    llm_preset_name: str = "",
    runtime_world_info: WorldInfoResult | Mapping[str, Any] | None = None,
    substitute_macros: bool = True,
) -> list[dict[str, Any]]:
    """The messages ``generate_task`` would wrap around ``messages``, without sending."""
    state = await context.chat_state()
    connection = await context.resolve_named("")
    preset = await context.preset_named(llm_preset_name) if llm_preset_name else state.chat_preset
    pstate = tp.prompt_state_for(
        state,
        preset=preset,
        model=connection.model,
        source=connection.source,
        api=connection.api,
        text_family=False,
    )
    wi = (
        world_info_from_mapping(runtime_world_info)
        if isinstance(runtime_world_info, Mapping)
        else runtime_world_info
    )
    renderer = context.runtime.prompt_renderer
    substitute = tp.make_substitute(pstate, wi, state.compat, state, renderer)
    task = tp.validate_task_messages(messages)
    if substitute_macros:
        task = tp.substitute_task_messages(task, substitute, state.compat, renderer)
    return tp.build_envelope(
        pstate,
        wi,
        task,
        include_character_card=include_character_card,
        substitute=substitute,
        compat=state.compat,
    )
