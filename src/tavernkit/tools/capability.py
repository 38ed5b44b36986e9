"""May this generation call tools? A written truth table, tested row by row.

Inputs: the profile's tool facts (:class:`ToolCapabilities`), the requested function-call
mode, and the generation kind. :func:`can_perform_tool_calls` is the main chat's question
("offer the registered tools to this turn?"); ``generate_task``'s per-request ``tools`` are
asked for explicitly and are not gated by the kind (a task runs as ``quiet``).

The table (first matching row wins; ``*`` is any value)::

    row  enabled  kind                          resolved mode          native ok  result
    1    False    *                             *                      *          False
    2    True     impersonate|quiet|continue    *                      *          False
    3    True     normal|swipe|regenerate       native                 True       True
    4    True     normal|swipe|regenerate       native                 False      False
    5    True     normal|swipe|regenerate       prompt_xml|prompt_json *          True

"native ok" is :func:`is_tool_calling_supported`: a chat-family API whose model supports tools
(``supports_tools`` unknown counts as no). "resolved mode" is
:func:`~tavernkit.tools.modes.resolve_function_call_mode`: ``auto`` becomes native when native
is ok and the profile does not force plain-text calling, else ``prompt_xml``; explicit modes
stay as asked. Why rows 2: an impersonation writes the user's line, a quiet prompt is a
background request, and a continuation extends text already shown, so none of them may
start a tool round (as in SillyTavern). Why row 5: the prompt protocols are plain text, so
every model and every API family can follow them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from tavernkit.errors import GenerateTaskError
from tavernkit.tools.modes import resolve_function_call_mode

__all__ = [
    "GenerationKind",
    "ToolCapabilities",
    "can_perform_tool_calls",
    "is_tool_calling_supported",
]

GenerationKind = Literal["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]
_KINDS = frozenset(get_args(GenerationKind))
_TOOL_KINDS = frozenset({"normal", "swipe", "regenerate"})
_NATIVE_FAMILIES = frozenset({"chat"})


@dataclass(frozen=True, slots=True)
class ToolCapabilities:
    """What the active profile says about tools.

    ``supports_tools`` is the model's native tool support (a profile override, else the
    model profile's known value; ``None`` = unknown). ``api_family`` is the profile's
    ``api`` (only the chat family has a native tool API). ``force_plain_text`` asks for the
    prompt protocol even where native works (SillyTavern's "plain-text function calling").
    ``enabled`` is the user's function-calling switch.
    """

    supports_tools: bool | None = None
    api_family: str = "chat"
    force_plain_text: bool = False
    enabled: bool = True


def is_tool_calling_supported(caps: ToolCapabilities) -> bool:
    """Whether the profile can call tools natively (the front end's
    ``isToolCallingSupported``): enabled, a chat-family API, and a model known to support
    tools."""
    return bool(caps.enabled and caps.api_family in _NATIVE_FAMILIES and caps.supports_tools)


def can_perform_tool_calls(kind: str, caps: ToolCapabilities, mode: str | None = "auto") -> bool:
    """Whether a generation of ``kind`` may offer tools; see the module's table. An unknown
    kind or mode is ``invalid_input``."""
    if kind not in _KINDS:
        raise GenerateTaskError(
            "invalid_input",
            f"unknown generation kind {kind!r}; expected one of " + ", ".join(sorted(_KINDS)),
            details={"field": "kind", "value": kind},
        )
    native_ok = is_tool_calling_supported(caps)
    resolved = resolve_function_call_mode(
        mode, native_supported=native_ok, force_plain_text=caps.force_plain_text
    )
    if not caps.enabled:  # row 1
        return False
    if kind not in _TOOL_KINDS:  # row 2
        return False
    if resolved == "native":  # rows 3 and 4
        return native_ok
    return True  # row 5
