"""Generation: ``/gen`` (a quiet generation on the chat), ``/genraw`` (the prompt alone),
``/trigger``, ``/continue``, ``/regenerate``, ``/swipe``, ``/impersonate``.

The commands only describe what to generate (:class:`~tavernkit.stscript.host.GenerationRequest`);
the host runs it through the chat's connection, so a server counts it against the user's
rate limit and the prompt is the chat's own.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tavernkit.jscompat import is_false_boolean, is_true_boolean, js_to_number
from tavernkit.stscript.commands.flow import resolve_operand
from tavernkit.stscript.commands.text import trim_to_end_sentence
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import GenerationKind, GenerationRequest
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import pipe_text

__all__ = ["register"]


def _resolved(call: CommandCall, name: str) -> str | None:
    value = call.arg(name)
    if value is None:
        return None
    return pipe_text(resolve_operand(call, value))


def _length(call: CommandCall) -> int | None:
    text = _resolved(call, "length")
    if text is None:
        return None
    number = js_to_number(text)
    return int(number) if not math.isnan(number) and number > 0 else None


def _stop(call: CommandCall) -> tuple[str, ...] | None:
    """``setEphemeralStopStrings``: the value must be a JSON list (anything else adds no stop
    string); each item is added once, in order."""
    text = _resolved(call, "stop")
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, list):
        return None
    unique: list[str] = []
    for item in parsed:
        value = pipe_text(item)
        if value not in unique:
            unique.append(value)
    return tuple(unique)


async def _gen(call: CommandCall) -> Any:
    host = call.host
    host.input_text = ""
    trim = is_true_boolean(call.text("trim") or "")
    request = GenerationRequest(
        "quiet",
        prompt=call.value_text(),
        quiet_to_loud=(call.text("as") or "system") == "char",
        name=call.text("name"),
        length=_length(call),
        trim=trim,
        stop=_stop(call),
    )
    result = await call.runner.generate(request)
    return trim_to_end_sentence(result) if trim else result


async def _genraw(call: CommandCall) -> Any:
    prompt = call.value_text()
    if not prompt:
        return ""
    host = call.host
    host.input_text = ""
    trim = is_true_boolean(call.text("trim") or "")
    request = GenerationRequest(
        "raw",
        prompt=prompt,
        quiet_to_loud=(call.text("as") or "system") == "char",
        length=_length(call),
        trim=trim,
        stop=_stop(call),
        system=_resolved(call, "system") or "",
        prefill=_resolved(call, "prefill") or "",
        instruct=not is_false_boolean(call.text("instruct") or ""),
    )
    result = await call.runner.generate(request)
    return trim_to_end_sentence(result) if trim else result


def _turn(kind: GenerationKind) -> Any:
    async def callback(call: CommandCall) -> Any:
        wait = is_true_boolean(call.text("await") or "")
        member = call.value_text() if kind == "normal" else None
        await call.runner.generate(GenerationRequest(kind, member=member or None, wait=wait))
        return ""

    return callback


def register(registry: CommandRegistry) -> None:
    reg = registry.register
    common = (
        NamedArgSpec("lock", types=("bool",)),
        NamedArgSpec("as", enum=("system", "char"), default="system"),
        NamedArgSpec("length", types=("number",)),
        NamedArgSpec("trim", types=("bool",)),
        NamedArgSpec("stop", types=("list",)),
    )
    reg("gen", _gen, named_args=(*common, "name"), help="A quiet generation on the chat.")
    reg(
        "genraw",
        _genraw,
        named_args=(
            *common,
            NamedArgSpec("instruct", types=("bool",), default="on"),
            "system",
            "prefill",
        ),
        help="A generation from the prompt alone.",
    )
    waiting = (NamedArgSpec("await", types=("bool",), default="false"),)
    reg("trigger", _turn("normal"), named_args=waiting, help="Generates the next reply.")
    reg(
        "continue",
        _turn("continue"),
        aliases=("cont",),
        named_args=waiting,
        help="Continues the last reply.",
    )
    reg(
        "regenerate",
        _turn("regenerate"),
        named_args=waiting,
        unnamed_types=(),
        help="Regenerates the last reply.",
    )
    reg(
        "swipe",
        _turn("swipe"),
        named_args=waiting,
        unnamed_types=(),
        help="A new swipe of the last reply.",
    )
    reg(
        "impersonate",
        _turn("impersonate"),
        aliases=("imp",),
        named_args=waiting,
        help="Writes the user's next message into the input box.",
    )
