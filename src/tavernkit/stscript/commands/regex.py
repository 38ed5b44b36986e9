"""``/regex``, ``/regex-state``, ``/regex-toggle``: the regex scripts, through the host's
:class:`~tavernkit.stscript.host.RegexBridge` (the regex engine fills it in; without one no
script exists, so ``/regex`` warns and returns the text unchanged)."""

from __future__ import annotations

from typing import Any

from tavernkit.jscompat import is_false_boolean, is_true_boolean
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import Toast
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec

__all__ = ["register"]


def _regex(call: CommandCall) -> Any:
    text = call.value_text()
    name = call.text("name")
    if not name:
        call.host.toast(Toast("warning", "No regex script name provided.", None, None))
        return text
    result, warning = call.host.regex.run_script(name, text)
    if warning:
        call.host.toast(Toast("warning", warning, None, None))
    return result


def _state(call: CommandCall) -> Any:
    name = call.value_text()
    state = call.host.regex.script_state(name)
    if state is None:
        call.host.toast(Toast("warning", f"Regex script '{name}' not found.", None, None))
        return ""
    return "true" if state else "false"


def _toggle(call: CommandCall) -> Any:
    name = call.value_text()
    value = call.text("state")
    state = (
        True
        if value and is_true_boolean(value)
        else False
        if value and is_false_boolean(value)
        else None
    )
    found = call.host.regex.toggle(name, state)
    if found is None:
        call.host.toast(Toast("warning", f"Regex script '{name}' not found.", None, None))
        return ""
    return found


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
