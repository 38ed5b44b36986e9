"""Function-call modes and the options that shape the prompt protocols.

``native`` sends tools through the provider's own tool API. The two prompt protocols put the
tool catalogue into the prompt and read calls back out of the reply text, so they work with
any model: ``prompt_xml`` (the ``<function_calls>`` protocol) and ``prompt_json`` (one fenced
``{"tool_calls": [...]}`` object). ``auto`` picks native when the profile supports tools and
does not ask for plain-text calling, else ``prompt_xml``.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self, cast, get_args

from tavernkit.errors import GenerateTaskError

__all__ = [
    "FunctionCallMode",
    "FunctionCallOptions",
    "ProtocolStyle",
    "ResolvedMode",
    "make_trigger_signal",
    "resolve_function_call_mode",
]

FunctionCallMode = Literal["auto", "native", "prompt_xml", "prompt_json"]
ResolvedMode = Literal["native", "prompt_xml", "prompt_json"]
ProtocolStyle = Literal["json_schema", "table"]

_MODES = frozenset(get_args(FunctionCallMode))
_STYLES = frozenset(get_args(ProtocolStyle))
_TRIGGER_ALPHABET = string.ascii_letters + string.digits

#: The most corrective retries a caller may ask for (a bad protocol reply costs a request).
MAX_RETRIES_LIMIT = 10
DEFAULT_RETRIES = 2


def resolve_function_call_mode(
    requested: str | None,
    *,
    native_supported: bool,
    force_plain_text: bool = False,
) -> ResolvedMode:
    """The mode a request runs in.

    ``requested`` is trimmed and lower-cased; ``None`` or ``""`` mean ``auto``. Explicit modes
    are kept as asked (an explicit ``native`` on a profile without tool support stays
    ``native``: :func:`~tavernkit.tools.capability.can_perform_tool_calls` then says no,
    rather than silently changing the protocol the caller chose). An unknown mode is
    ``invalid_input``.
    """
    mode = (requested or "auto").strip().lower() or "auto"
    if mode not in _MODES:
        raise GenerateTaskError(
            "invalid_input",
            f"unknown function_call_mode {requested!r}; expected one of "
            + ", ".join(sorted(_MODES)),
            details={"field": "function_call_mode", "value": requested},
        )
    if mode == "auto":
        return "native" if native_supported and not force_plain_text else "prompt_xml"
    return cast(ResolvedMode, mode)


def make_trigger_signal(rng: random.Random) -> str:
    """A fresh ``<Function_XXXX_Start/>`` trigger; the RNG is injected so runs replay."""
    tag = "".join(rng.choice(_TRIGGER_ALPHABET) for _ in range(4))
    return f"<Function_{tag}_Start/>"


@dataclass(frozen=True, slots=True)
class FunctionCallOptions:
    """``function_call_options`` of ``generate_task``.

    ``trigger_signal=None`` lets the caller draw one with :func:`make_trigger_signal`;
    ``max_retries`` is how many corrective re-asks a malformed protocol reply may get.
    """

    protocol_style: ProtocolStyle = "json_schema"
    trigger_signal: str | None = None
    required_function_name: str | None = None
    max_retries: int = DEFAULT_RETRIES

    def __post_init__(self) -> None:
        if self.protocol_style not in _STYLES:
            raise GenerateTaskError(
                "invalid_input",
                f"unknown protocol_style {self.protocol_style!r}; expected json_schema or table",
                details={"field": "function_call_options.protocol_style"},
            )
        trigger = self.trigger_signal
        if trigger is not None and (not trigger.strip() or "\n" in trigger or "\r" in trigger):
            raise GenerateTaskError(
                "invalid_input",
                "trigger_signal must be one non-empty line",
                details={"field": "function_call_options.trigger_signal"},
            )
        if not 0 <= self.max_retries <= MAX_RETRIES_LIMIT:
            raise GenerateTaskError(
                "invalid_input",
                f"max_retries must be between 0 and {MAX_RETRIES_LIMIT}",
                details={"field": "function_call_options.max_retries"},
            )

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any] | FunctionCallOptions | None) -> Self:
        """Options from a caller's dict; snake_case and the brief's camelCase both work."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise GenerateTaskError(
                "invalid_input",
                "function_call_options must be an object",
                details={"field": "function_call_options"},
            )

        def pick(*keys: str) -> Any:
            return next((value[k] for k in keys if value.get(k) not in (None, "")), None)

        style = pick("protocol_style", "protocolStyle") or "json_schema"
        retries = pick("max_retries", "maxRetries")
        required = pick("required_function_name", "requiredFunctionName")
        trigger = pick("trigger_signal", "triggerSignal")
        for field_name, item in (("required_function_name", required), ("trigger_signal", trigger)):
            if item is not None and not isinstance(item, str):
                raise GenerateTaskError(
                    "invalid_input",
                    f"function_call_options.{field_name} must be a string",
                    details={"field": f"function_call_options.{field_name}"},
                )
        if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int)):
            raise GenerateTaskError(
                "invalid_input",
                "function_call_options.max_retries must be an integer",
                details={"field": "function_call_options.max_retries"},
            )
        return cls(
            protocol_style=str(style).strip().lower(),  # type: ignore[arg-type]
            trigger_signal=trigger,
            required_function_name=required.strip() if required else None,
            max_retries=DEFAULT_RETRIES if retries is None else retries,
        )
