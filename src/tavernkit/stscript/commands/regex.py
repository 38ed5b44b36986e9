"""``/regex``, ``/regex-state``, ``/regex-toggle``: the regex scripts, through the host's
:class:`~tavernkit.stscript.host.RegexBridge` (:mod:`tavernkit.regex` over the chat's lists;
without one no script exists, so ``/regex`` warns and returns the text unchanged)."""

from __future__ import annotations

from typing import Any

from tavernkit.jscompat import is_true_boolean
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import RegexCommand
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec

__all__ = ["register"]


async def _run(
    call: CommandCall,
    command: RegexCommand,
    script: str | None,
    text: str = "",
    *,
    state: str | None = None,
    quiet: bool = False,
) -> Any:
    host = call.host
    reply = await host.regex.command(
        command, script, text, state=state, quiet=quiet, env=host.macro_env()
    )
    for toast in reply.toasts:
        host.toast(toast)
    return reply.output


async def _regex(call: CommandCall) -> Any:
    return await _run(call, "regex", call.text("name"), call.value_text())


async def _state(call: CommandCall) -> Any:
    return await _run(call, "regex-state", call.value_text())


async def _toggle(call: CommandCall) -> Any:
    quiet = is_true_boolean(call.text("quiet") or "")
    return await _run(
        call, "regex-toggle", call.value_text(), state=call.text("state"), quiet=quiet
    )


def register(registry: CommandRegistry) -> None:
    reg = registry.register
    reg("regex", _regex, named_args=("name",), help="Runs a regex script on the text.")
    reg("regex-state", _state, help="'true' when the regex script is enabled.")
    reg(
        "regex-toggle",
        _toggle,
        named_args=(
            NamedArgSpec("state", enum=("on", "off", "toggle")),
            NamedArgSpec("quiet", types=("bool",)),
        ),
        help="Turns a regex script on or off.",
    )
