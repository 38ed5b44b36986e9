"""The hooks a tavernkit plugin can implement.

Small on purpose, in the style of simonw/llm's ``hookspecs.py``: each hook hands the plugin a
``register`` callable (or the object to extend) instead of asking it to return things, so one
implementation can register several items and the caller decides how to store them.

Hooks of this issue:

- ``register_formats(register)``: file formats ``tavernkit import`` detects and reads (and,
  optionally, ``tavernkit export`` writes). The built-in formats register through this hook too.
- ``register_commands(cli)``: extra ``tavernkit`` sub-commands on the typer app.
- ``register_tools(register)``: function tools offered to the main chat, registered on each
  ``Tavern``'s own registry when it is made.

Request hooks (the generation issues):

- ``before_request(request, stream, scope)``: sees every outgoing provider request, after the
  turn runner adapted it to the attempt's model, and may return a replacement. Every
  implementation runs, each seeing the previous one's result.
- ``before_chat_turn(chat_id, kind, request)`` / ``after_chat_turn(chat_id, kind, result)``:
  the main chat's hooks (SillyTavern's ``CHAT_COMPLETION_SETTINGS_READY`` and
  ``GENERATION_ENDED``), called by the chat service around a chat turn. A generation made with
  ``request_scope="extension_internal"`` (every ``generate_task``, a plugin's background
  call) skips them, so a plugin reacting to chat turns is not triggered by its own requests.

Extension hooks (issue 22), each called once per ``Tavern`` as it is made:

- ``register_macros(register)``: macros for the macro engine (name, handler, arity...), on the
  Tavern's own macro registry, so that Tavern's renderer (chat turns, previews,
  ``generate_task``, ``render_template``) has them and no other Tavern does;
- ``register_template_functions(register)``: function providers of the prompt renderer
  (``{{name::a::b}}`` in the macro syntax, ``{name(a, b)}`` in ChatLuna's);
- ``register_providers(register)``: hosted APIs, as ``ProviderSource`` records (base URL,
  auth, wire adapter, capability family) that a connection profile names by ``source``.

STscript hook: ``register_script_commands(register)`` adds slash commands to the Tavern's
STscript registry: ``register(name, function, *, aliases=(), named_args=(), unnamed_types=
("string",), split=False, split_count=None, raw_quotes=False, help="")`` where ``function``
takes a :class:`tavernkit.stscript.CommandCall` (sync or ``async``) and returns the pipe.
A built-in name cannot be taken.

Server hook: ``register_routes(app)`` gives each plugin the server's FastAPI application
once, when ``tavernkit serve`` builds it (``add_plugin_routes`` is what the server calls).

Not yet here (no type to pass exists): ``on_message_stored(...)``, a main-chat hook skipped
by ``extension_internal`` like the turn hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    import typer

    from tavernkit.generation.result import TurnResult
    from tavernkit.plugins.formats import RegisterFormat
    from tavernkit.providers.request import PromptRequest
    from tavernkit.providers.sources import ProviderSource
    from tavernkit.text.macros.registry import MacroDef
    from tavernkit.text.render.types import FunctionProvider
    from tavernkit.tools.registry import FunctionTool

__all__ = [
    "PROJECT_NAME",
    "after_chat_turn",
    "before_chat_turn",
    "before_request",
    "hookimpl",
    "hookspec",
    "register_commands",
    "register_formats",
    "register_macros",
    "register_providers",
    "register_routes",
    "register_script_commands",
    "register_template_functions",
    "register_tools",
]

PROJECT_NAME = "tavernkit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_formats(register: RegisterFormat) -> None:
    """Register file formats: ``register(name, detect, read, write=None, *, kind, priority)``.

    ``detect(data: bytes) -> bool`` must be cheap and never raise on foreign bytes: every
    registered detector may see every imported file. ``read(data: bytes, source: str)`` returns
    the imported value (a model such as ``Character`` or ``Lorebook``) and raises
    ``tavernkit.errors.FormatError`` naming ``source`` on bad input. ``write(value, **options)
    -> bytes`` is given only for formats tavernkit can export.
    """


@hookspec
def register_commands(cli: typer.Typer) -> None:
    """Add sub-commands to the ``tavernkit`` typer app (``@cli.command()``)."""


@hookspec
def register_tools(register: Callable[[FunctionTool], None]) -> None:
    """Register function tools: ``register(FunctionTool(...))`` (SillyTavern's
    ``registerFunctionTool``). Called once for every ``Tavern``, so each gets its own copy in
    ``tk.tools``; the chat turns of that Tavern offer them (``should_register`` is still asked
    before every turn). Two tools with one name are ``invalid_input``."""


@hookspec
def before_request(request: PromptRequest, stream: bool, scope: str) -> PromptRequest | None:
    """See (and optionally replace) an outgoing provider request.

    ``request`` is a ``tavernkit.providers.request.ChatPrompt`` or ``TextPrompt`` (frozen:
    return a changed copy, e.g. ``dataclasses.replace(request, sampling=...)``, or ``None`` to
    send it as it is). ``stream`` says whether it is sent streaming. ``scope`` is ``"main"``
    for a chat turn and ``"extension_internal"`` for ``generate_task`` and other background
    calls. Called once per HTTP request (each tool round, revision and retry of a turn).
    """


@hookspec
def before_chat_turn(
    chat_id: str | None, kind: str, request: PromptRequest
) -> PromptRequest | None:
    """A main-chat turn's built prompt before it is sent (``kind``: normal, swipe, continue,
    impersonate...); may return a replacement. Never called for
    ``request_scope="extension_internal"``."""


@hookspec
def after_chat_turn(chat_id: str | None, kind: str, result: TurnResult) -> None:
    """A main-chat turn ended (completed, failed or aborted; ``result.text`` is what was
    delivered). Never called for ``request_scope="extension_internal"``."""


@hookspec
def register_macros(register: Callable[..., MacroDef]) -> None:
    """Register macros: ``register(name, handler, *, args=0, list=False, aliases=(),
    description="", strict_args=True, delay_arg_resolution=False)`` (the keywords of
    ``MacroRegistry.register``). ``handler(call: MacroCall)`` returns the text; ``call.args``
    are the evaluated arguments. A built-in macro's name (or one another plugin took) is a
    ``PluginError``: a plugin adds macros, it does not change SillyTavern's."""


@hookspec
def register_template_functions(register: Callable[[str, FunctionProvider], object]) -> None:
    """Register prompt-renderer functions: ``register(name, handler)`` with
    ``handler(args: list[str], variables: Mapping, configurable: Mapping) -> str`` (may be
    ``async``). They work in every template syntax and shadow a macro of the same name."""


@hookspec
def register_providers(register: Callable[[ProviderSource], None]) -> None:
    """Register hosted APIs: ``register(ProviderSource(name, base_url=..., auth=...,
    key_required=..., adapter=..., family=...))``. A chat-API connection profile whose
    ``source`` is ``name`` sends through it. Built-in source names cannot be taken."""


@hookspec
def register_script_commands(register: Callable[..., object]) -> None:
    """Register STscript commands: ``register(name, function, **spec)`` (see the module
    docstring); a script of this Tavern can then call ``/name``. Taking a built-in name is a
    ``PluginError``."""


@hookspec
def register_routes(app: object) -> None:
    """Add HTTP routes to the server's FastAPI application (``@app.get(...)``,
    ``app.include_router(router)``). Called once per application by ``tavernkit serve``;
    never called outside the server, so a plugin may import FastAPI inside this hook."""
