"""The hooks a tavernkit plugin can implement.

Small on purpose, in the style of simonw/llm's ``hookspecs.py``: each hook hands the plugin a
``register`` callable (or the object to extend) instead of asking it to return things, so one
implementation can register several items and the caller decides how to store them.

Hooks of this issue:

- ``register_formats(register)``: file formats ``tavernkit import`` detects and reads (and,
  optionally, ``tavernkit export`` writes). The built-in formats register through this hook too.
- ``register_commands(cli)``: extra ``tavernkit`` sub-commands on the typer app.

Hooks later issues add here, with the same ``register`` style (kept out until the types they
pass exist, so no plugin can depend on a signature nobody implemented):

- ``register_macros(register)``: macros for the macro engine (name, arity, handler);
- ``register_template_functions(register)``: functions for the prompt renderer's templates;
- ``register_providers(register)``: wire adapters and providers (base URL, auth, capabilities);
- ``register_tools(register)``: function tools the model may call;
- ``before_request(request, context)``: may change the outgoing provider request (the last
  chance to edit messages, samplers or headers; returns the request to send);
- main-chat hooks (before/after a chat turn, on message stored). A generation made with
  ``request_scope="extension_internal"`` (a plugin's own ``generate_task`` call) skips them, so a
  plugin reacting to chat turns is not triggered by its own background requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import typer

    from tavernkit.plugins.formats import RegisterFormat

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec", "register_commands", "register_formats"]

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
