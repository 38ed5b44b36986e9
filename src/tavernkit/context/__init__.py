"""The plugin context: SillyTavern's request API on top of a small port.

:class:`TavernContext` (:mod:`.tavern_context`) is what a plugin or a bot holds (the analogue of
a front end's ``getContext()``), returned by ``Tavern.context(chat_id=None)``.

It knows the active character, persona, chat, connection profile and presets (read from the
store's settings at each call, so a change of selection is seen by the next call) and offers
every generation call: ``generate_task`` (the one to use), its stream, the tool loop, the
lower-level ``generate_raw`` / ``generate_quiet_prompt``, and the prompt preview. Nothing here
persists a generation, except ``generate_quiet_prompt(quiet_to_loud=True)``, which hands its
reply to the chat service to append.

Capability questions (``is_tool_calling_supported``, ``can_perform_tool_calls``,
``get_chat_completion_model``) are ``async`` here, unlike in the reference front end: they
read the active profile from the store.

The request API, one module each: :mod:`.raw_generation` (``generate_raw``,
``generate_quiet_prompt``), :mod:`.request_primitives` (``send_chat_request`` and friends),
:mod:`.service_classes` (``ChatCompletionService``, ``TextCompletionService``,
``ConnectionManagerRequestService``) and :mod:`.request_data` (request data -> provider
request, shared by the last two); the prompt preview is :mod:`.prompt_preview`. They depend
on :class:`~.port.RequestPort`, never on the context class. ``generate_task`` itself is
:mod:`tavernkit.tasks`; the chat turn's runner is :mod:`tavernkit.generation`.
"""

from __future__ import annotations

from tavernkit.context.connection_profiles import ConnectionProfiles
from tavernkit.context.port import ProfileReader, RequestPort
from tavernkit.context.tavern_context import LoudChats, TavernContext

__all__ = ["ConnectionProfiles", "LoudChats", "ProfileReader", "RequestPort", "TavernContext"]
