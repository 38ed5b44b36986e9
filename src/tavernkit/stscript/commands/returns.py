"""``return=``: where a command's result goes (SillyTavern's ``slashCommandReturnHelper``).

``pipe`` (the text), ``object`` (JSON), ``none``, ``toast-text`` / ``toast-html`` (a toast),
``popup-text`` / ``popup-html`` / ``chat-text`` / ``chat-html`` (shown to the user through the
host's ``show``), ``console`` (the log)."""

from __future__ import annotations

import logging
from typing import Any

from tavernkit.jscompat import js_json_stringify
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import Toast

__all__ = ["RETURN_TYPES", "do_return", "escape_html"]

RETURN_TYPES = (
    "pipe",
    "object",
    "none",
    "toast-text",
    "toast-html",
    "popup-text",
    "popup-html",
    "chat-text",
    "chat-html",
    "console",
)
_log = logging.getLogger("tavernkit.stscript")


def escape_html(text: str) -> str:
    """SillyTavern's ``escapeHtml``."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#039;")
    )


def do_return(call: CommandCall, kind: str, data: Any, text: str) -> Any:
    """The command's pipe for ``return=kind``; ``text`` is the data as text."""
    match kind:
        case "pipe":
            return text
        case "object":
            return data if isinstance(data, str) else js_json_stringify(data)
        case "toast-text":
            call.host.toast(Toast("info", escape_html(text), None, {"escapeHtml": True}))
        case "toast-html":
            call.host.toast(Toast("info", text, None, {"escapeHtml": False}))
        case "popup-text" | "popup-html" | "chat-text" | "chat-html":
            call.host.show(text, as_html=kind.endswith("html"))
        case "console":
            _log.info("%s", text)
    return ""
