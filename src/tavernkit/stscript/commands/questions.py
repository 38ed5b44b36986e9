"""Commands that wait for the user: ``/input``, ``/popup`` and ``/buttons``.

Each builds a :class:`~tavernkit.stscript.host.Question` and awaits the host's answer
(:meth:`ScriptRunner.ask`). What each returns follows SillyTavern 1.18's popups:

- ``/input``: the typed text on OK, ``''`` on Cancel; ``onSuccess=`` / ``onCancel=`` closures
  run after the answer, with ``{{pipe}}`` the typed text (``''`` for a cancel), and the command
  still returns the text;
- ``/popup``: the popup's text; with ``result=true`` ``1`` for OK, ``0`` for the second button
  (``cancelButton=``) and ``''`` for a popup closed otherwise (Escape);
- ``/buttons``: the chosen label, ``''`` on cancel; with ``multiple=true`` a JSON array of the
  labels toggled on when OK is pressed (``[]`` on cancel).

When no one can be asked (a headless run: an API call without the interactive mode,
``generate``-style runs), ``/input`` returns its ``default=`` (as if OK were pressed on the
untouched box, so ``onSuccess`` runs), ``/popup`` and ``/buttons`` what a cancel returns
(``/popup`` without ``result`` still returns its text).
"""

from __future__ import annotations

import json
import math
from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.jscompat import is_true_boolean
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import Answer, Question
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import BreakController, ScriptClosure, pipe_text

__all__ = ["register"]

#: SillyTavern's input box height when ``rows=`` is not a number
DEFAULT_ROWS = 4


def _flag(call: CommandCall, name: str) -> bool:
    return is_true_boolean(call.text(name) or "")


def _rows(call: CommandCall) -> int:
    raw = call.text("rows")
    if raw is None:
        return DEFAULT_ROWS
    try:
        rows = float(raw)
    except ValueError:
        return DEFAULT_ROWS
    if math.isnan(rows) or math.isinf(rows):
        return DEFAULT_ROWS
    return max(1, min(int(rows), 50))


async def _run_handler(call: CommandCall, name: str, pipe: str) -> None:
    """Run the ``onSuccess``/``onCancel`` closure ``name`` (if given) with ``pipe``."""
    handler = call.arg(name)
    if handler is None or handler == "":
        return
    if not isinstance(handler, ScriptClosure):
        raise ScriptError(f"argument '{name}' of /input must be a closure")
    closure = handler.bound(handler.scope.parent or call.scope, BreakController())
    closure.scope.pipe = pipe
    await call.runner.run_closure(closure)


async def _input(call: CommandCall) -> Any:
    default = call.text("default") or ""
    question = Question(
        "input",
        call.value_text(),
        default=default,
        ok_button=call.text("okButton"),
        large=_flag(call, "large"),
        wide=_flag(call, "wide"),
        rows=_rows(call),
    )
    answer = await call.runner.ask(question)
    if answer is None:  # no one to ask: the untouched box, accepted
        answer = Answer("ok", default)
    if answer.button == "ok":
        await _run_handler(call, "onSuccess", answer.text)
        return answer.text
    await _run_handler(call, "onCancel", "")
    return ""


async def _popup(call: CommandCall) -> Any:
    text = call.value_text()
    question = Question(
        "popup",
        text,
        ok_button=call.text("okButton"),
        cancel_button=call.text("cancelButton") or None,
        large=_flag(call, "large"),
        wide=_flag(call, "wide") or _flag(call, "wider"),
        # SillyTavern's header= is a heading above the text: the question's title
        title=call.text("header") or None,
    )
    answer = await call.runner.ask(question)
    if not _flag(call, "result"):
        return text
    if answer is None or answer.button is None:
        return ""
    return "1" if answer.button == "ok" else "0"


def _labels(call: CommandCall) -> list[str] | None:
    """``labels=``: a JSON array (or a scoped variable holding one) of strings or of
    ``{"label": …}`` objects; None when it is none of these (SillyTavern only warns)."""
    raw = call.arg("labels")
    if isinstance(raw, str) and call.scope.exists(raw):
        raw = call.scope.get(raw)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if not isinstance(raw, list) or not raw:
        return None
    labels = []
    for item in raw:
        if isinstance(item, dict):
            item = item.get("label", "")
        labels.append(pipe_text(item))
    return labels


async def _buttons(call: CommandCall) -> Any:
    labels = _labels(call)
    if labels is None:
        return ""
    multiple = _flag(call, "multiple")
    question = Question("buttons", call.value_text(), labels=tuple(labels), multiple=multiple)
    answer = await call.runner.ask(question)
    chosen: list[str] = []
    if answer is not None and answer.button == "ok":
        chosen = [labels[i] for i in answer.chosen if 0 <= i < len(labels)]
    if multiple:
        return json.dumps(chosen, ensure_ascii=False, separators=(",", ":"))
    return chosen[0] if chosen else ""


def register(registry: CommandRegistry) -> None:
    reg = registry.register
    box = (NamedArgSpec("large", types=("bool",)), NamedArgSpec("wide", types=("bool",)))
    reg(
        "input",
        _input,
        aliases=("prompt",),
        named_args=(
            "default",
            *box,
            "okButton",
            NamedArgSpec("rows", types=("number",)),
            NamedArgSpec("onSuccess", types=("closure",)),
            NamedArgSpec("onCancel", types=("closure",)),
        ),
        help="Asks the user for a line of text (default=); returns it, '' on Cancel.",
    )
    reg(
        "popup",
        _popup,
        named_args=(
            *box,
            NamedArgSpec("wider", types=("bool",)),
            NamedArgSpec("transparent", types=("bool",)),
            "okButton",
            "cancelButton",
            "header",
            NamedArgSpec("result", types=("bool",)),
        ),
        help="Shows the text with OK (and cancelButton=); returns the text, or with "
        "result=true 1/0/''.",
    )
    reg(
        "buttons",
        _buttons,
        named_args=(
            NamedArgSpec("labels", types=("list",)),
            NamedArgSpec("multiple", types=("bool",)),
        ),
        help="Shows the text with one button per label; returns the label chosen ('' on "
        "cancel; multiple=true: a JSON array).",
    )
