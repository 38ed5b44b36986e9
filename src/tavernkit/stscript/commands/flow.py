"""Values and control flow: ``/pass``, ``/echo``, ``/run``, ``/let``, ``/var``, ``/if``,
``/while``, ``/times``, ``/abort``, ``/delay``, closures' (de)serialisation, ``/parser-flag``."""

from __future__ import annotations

import math
import re
from typing import Any

from tavernkit.errors import ScriptBudgetExceeded, ScriptError
from tavernkit.jscompat import (
    is_false_boolean,
    is_true_boolean,
    js_lower,
    js_string,
    js_to_number,
)
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import Question, Toast
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import (
    BreakController,
    ClosureResult,
    Scope,
    ScriptClosure,
    js_parse_int,
    numeric_or_text,
    pipe_text,
)

__all__ = ["MAX_LOOPS", "register", "resolve_operand", "sanitize_html"]

#: ``/while`` and ``/times`` stop after this many rounds unless ``guard=off``.
MAX_LOOPS = 100


def _pass(call: CommandCall) -> Any:
    value = call.value
    if isinstance(value, list):
        return value[0] if len(value) == 1 else "".join(pipe_text(v) for v in value)
    return "" if value is None else value


_SCRIPT = re.compile(r"<(script|style|iframe|object|embed)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_BAD_TAG = re.compile(r"</?(script|style|iframe|object|embed|link|meta)\b[^>]*>", re.I)
_EVENT_ATTR = re.compile(r"\s+on\w+\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.I)
_JS_URL = re.compile(r"(href|src)\s*=\s*([\"']?)\s*javascript:[^\"'>\s]*\2", re.I)


def sanitize_html(text: str) -> str:
    """What DOMPurify leaves of HTML for a toast: no scripts, styles, frames, event handlers
    or ``javascript:`` links."""
    text = _SCRIPT.sub("", text)
    text = _BAD_TAG.sub("", text)
    text = _EVENT_ATTR.sub("", text)
    return _JS_URL.sub(r"\1=\2#\2", text)


async def _echo(call: CommandCall) -> Any:
    value = call.value
    text = "" if value is None else pipe_text(_pass(call))
    if text == "":
        return ""
    severity = call.text("severity")
    if severity and severity not in ("error", "warning", "success", "info"):
        call.toast("warning", f"Invalid severity provided for /echo command: {severity}")
        severity = None
    options: dict[str, Any] = {}
    timeout = js_parse_int(call.text("timeout"))
    if not math.isnan(timeout):
        options["timeOut"] = int(timeout)
    extended = js_parse_int(call.text("extendedTimeout"))
    if not math.isnan(extended):
        options["extendedTimeOut"] = int(extended)
    if is_true_boolean(call.text("preventDuplicates") or ""):
        options["preventDuplicates"] = True
    css = call.text("cssClass")
    if css:
        options["toastClass"] = css
    escape = call.text("escapeHtml")
    options["escapeHtml"] = True if escape is None else is_true_boolean(escape)
    if not options["escapeHtml"]:
        text = sanitize_html(text)
    title = call.text("title") or None
    if _flag(call, "awaitDismissal") and call.host.asker is not None:
        # the toast is the question: the script goes on once the user dismissed it
        asked = Question("echo", text, severity=severity or "info", title=title)
        await call.runner.ask(asked)
        return text
    call.host.toast(Toast(severity or "info", text, title, options))
    return text


def _flag(call: CommandCall, name: str) -> bool:
    return is_true_boolean(call.text(name) or "")


# -- running closures and quick replies --------------------------------------------------------


async def _run(call: CommandCall) -> Any:
    name = call.value
    if isinstance(name, list):
        name = next((v for v in name if isinstance(v, ScriptClosure)), None) or "".join(
            pipe_text(v) for v in name
        )
    if name is None or name == "":
        raise ScriptError("No name provided for /run command")
    runner = call.runner
    if isinstance(name, ScriptClosure):
        closure = name.bound(name.scope.parent or call.scope, BreakController())
        return (await runner.run_closure(closure)).pipe
    name = pipe_text(name)
    scope = call.scope
    if scope.exists(name):
        value = scope.get(name)
        if not isinstance(value, ScriptClosure):
            raise ScriptError(f'"{name}" is not callable.')
        closure = value.bound(scope, BreakController())
        closure.provided = {
            arg.name: call.args[arg.name] for arg in value.node.arguments if arg.name in call.args
        }
        return (await runner.run_closure(closure)).pipe
    name = name.strip()
    # a quick reply (the quick-reply commands module runs it)
    from_qr = call.host.quick_replies.find_by_name(name)
    if from_qr is None:
        raise ScriptError(f'Error running Quick Reply "{name}": No Quick Reply found for "{name}".')
    try:
        return await runner.run_quick_reply(from_qr[0], from_qr[1], args=call.args, mode="run")
    except ScriptBudgetExceeded:
        raise
    except ScriptError as exc:
        raise ScriptError(f'Error running Quick Reply "{name}": {exc.message}') from exc


# -- scoped variables ---------------------------------------------------------------------------


def _joined(values: list[Any]) -> Any:
    if values and not isinstance(values[0], str):
        return values[0]
    return " ".join(pipe_text(v) for v in values)


def _let(call: CommandCall) -> Any:
    values = call.value_list()
    key = call.arg("key")
    if key is not None:
        if not isinstance(key, str):
            raise ScriptError("Key must be a string")
        if call.has_unnamed and values:
            value = _joined(values)
            call.scope.let(key, value)
            return value
        call.scope.let(key)
        return ""
    if not values:
        raise ScriptError("Variable name cannot be empty or undefined.")
    name = values.pop(0)
    if not isinstance(name, str):
        raise ScriptError("Key must be a string")
    if values:
        value = _joined(values)
        call.scope.let(name, value)
        return value
    call.scope.let(name)
    return ""


def _var(call: CommandCall) -> Any:
    values = call.value_list()
    key = call.arg("key")
    index = call.arg("index")
    kind = call.arg("as")
    if key is not None:
        if not isinstance(key, str):
            raise ScriptError("Key must be a string")
        if call.has_unnamed and values:
            value = _joined(values)
            call.scope.set(key, value, index, kind)
            return value
        return call.scope.get(key, index)
    if not values:
        raise ScriptError("Variable name cannot be empty or undefined.")
    name = values.pop(0)
    if not isinstance(name, str):
        raise ScriptError("Key must be a string")
    if values:
        value = _joined(values)
        call.scope.set(name, value, index, kind)
        return value
    return call.scope.get(name, index)


# -- conditions -------------------------------------------------------------------------------


def resolve_operand(call: CommandCall, operand: Any) -> Any:
    """A value in ``/if``, ``/while`` and the math commands: a number, else a scoped variable
    of that name, a chat variable, a global variable, else the text itself."""
    if operand is None:
        return None
    if isinstance(operand, ScriptClosure):
        return operand
    text = pipe_text(operand)
    number = js_to_number(text)
    if not math.isnan(number):
        return number
    scope: Scope = call.scope
    if scope.exists(text):
        value = scope.get(text)
        return "" if value is None else value
    variables = call.host.variables
    if variables.has(text, "local"):
        return numeric_or_text(variables.get(text, "local"))
    if variables.has(text, "global"):
        return numeric_or_text(variables.get(text, "global"))
    return text


def _first(call: CommandCall, *names: str) -> Any:
    for name in names:
        value = call.args.get(name)
        if value is not None and value != "":
            return value
    for name in names:
        if name in call.args and call.args[name] is not None:
            return call.args[name]
    return None


def _operands(call: CommandCall) -> tuple[Any, Any, Any]:
    left = resolve_operand(call, _first(call, "a", "left", "first", "x"))
    right = resolve_operand(call, _first(call, "b", "right", "second", "y"))
    return left, right, call.arg("rule")


def eval_boolean(rule: Any, a: Any, b: Any) -> bool:
    """``evalBoolean``: a truthiness check without a right operand, else a comparison."""
    if a is None:
        raise ScriptError("Left operand is not provided")
    if b is None:
        if rule is None or rule == "not":
            on_truthy = bool(rule != "not")
            text = pipe_text(a)
            if is_true_boolean(text):
                return on_truthy
            if is_false_boolean(text):
                return not on_truthy
            truthy = bool(a) and not (isinstance(a, float) and math.isnan(a))
            return on_truthy if truthy else not on_truthy
        raise ScriptError(
            "Unknown boolean comparison rule for truthy check. If right operand is not "
            f"provided, the rule must not provided or be 'not'. Provided: {js_string(rule)}"
        )
    rule = rule or "eq"
    numeric = isinstance(a, int | float) and isinstance(b, int | float)
    if numeric and rule in ("gt", "gte", "lt", "lte", "eq", "neq"):
        result = {
            "gt": a > b,
            "gte": a >= b,
            "lt": a < b,
            "lte": a <= b,
            "eq": a == b,
            "neq": a != b,
        }[rule]
        return bool(result)
    left = js_lower(pipe_text(a))
    right = js_lower(pipe_text(b))
    match rule:
        case "in":
            return right in left
        case "nin":
            return right not in left
        case "eq":
            return left == right
        case "neq":
            return left != right
    raise ScriptError(
        "Unknown boolean comparison rule for type string. Accepted: in, nin, eq, neq. "
        f"Provided: {js_string(rule)}"
    )


def _branch(values: list[Any]) -> Any:
    if not values:
        return None
    if isinstance(values[0], ScriptClosure):
        return values[0]
    return " ".join(pipe_text(v) for v in values)


async def _sub(call: CommandCall, command: Any) -> ClosureResult:
    return await call.runner.run_sub(command, call.scope, call.node.flags)


async def _if(call: CommandCall) -> Any:
    a, b, rule = _operands(call)
    result = eval_boolean(rule, a, b)
    command = _branch(call.value_list())
    if result and command:
        return (await _sub(call, command)).pipe
    other = call.arg("else")
    if not result and (isinstance(other, ScriptClosure) or (isinstance(other, str) and other)):
        return (await _sub(call, other)).pipe
    return ""


def _guard_off(call: CommandCall, command: str) -> bool:
    guard = call.arg("guard")
    if isinstance(guard, ScriptClosure):
        raise ScriptError(f"argument 'guard' cannot be a closure for command /{command}")
    return guard is not None and is_false_boolean(pipe_text(guard))


async def _loop_body(call: CommandCall, command: Any, macro: int | None = None) -> ClosureResult:
    if isinstance(command, ScriptClosure):
        closure = command.bound(command.scope.parent or call.scope, BreakController())
        if macro is not None:
            closure.scope.set_macro("timesIndex", macro)
        return await call.runner.run_closure(closure)
    text = pipe_text(command)
    if macro is not None:
        text = text.replace("{{timesIndex}}", str(macro))
    return await _sub(call, text)


async def _while(call: CommandCall) -> Any:
    limit = 2**53 - 1 if _guard_off(call, "while") else MAX_LOOPS
    command = _branch(call.value_list())
    outcome: ClosureResult | None = None
    for _ in range(limit):
        a, b, rule = _operands(call)
        if not (eval_boolean(rule, a, b) and command):
            break
        outcome = await _loop_body(call, command)
        if outcome.is_aborted or outcome.is_break or call.runner.aborted:
            break
    if outcome is not None and isinstance(outcome.pipe, str):
        return outcome.pipe
    return ""


async def _times(call: CommandCall) -> Any:
    value = call.value
    if isinstance(value, list):
        repeats = value[0] if value else ""
        rest = value[1:]
        command: Any = (
            rest[0]
            if rest and isinstance(rest[0], ScriptClosure)
            else " ".join(pipe_text(v) for v in rest)
        )
    else:
        repeats, _, command = pipe_text(value).partition(" ")
    limit = 2**53 - 1 if _guard_off(call, "times") else MAX_LOOPS
    count = js_to_number(pipe_text(repeats))
    iterations = 0 if math.isnan(count) else int(min(count, limit))
    outcome: ClosureResult | None = None
    for index in range(iterations):
        outcome = await _loop_body(call, command, index)
        if outcome.is_aborted or outcome.is_break or call.runner.aborted:
            break
    return "" if outcome is None or outcome.pipe is None else outcome.pipe


def _abort(call: CommandCall) -> Any:
    reason = "" if call.value is None else call.value_text()
    quiet = call.text("quiet")
    call.runner.abort(reason, quiet=not is_false_boolean(quiet if quiet is not None else "true"))
    return ""


async def _delay(call: CommandCall) -> Any:
    milliseconds = js_parse_int(call.value_text())
    if math.isnan(milliseconds) or milliseconds <= 0:
        return ""
    await call.runner.sleep(milliseconds / 1000)
    return ""


def _serialize(call: CommandCall) -> Any:
    value = call.value
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, ScriptClosure)), None)
    if not isinstance(value, ScriptClosure):
        raise ScriptError("unnamed argument must be a closure")
    return value.node.raw_text


def _deserialize(call: CommandCall) -> Any:
    text = call.value_text()
    root = call.runner.parse(text, call.node.flags)
    return ScriptClosure(root, Scope(call.scope))


def _noop(call: CommandCall) -> Any:
    return "" if call.value is None else call.value


def register(registry: CommandRegistry) -> None:
    _register_output_and_calls(registry)
    _register_variables(registry)
    _register_control(registry)
    _register_closures_and_parser(registry)


def _register_output_and_calls(registry: CommandRegistry) -> None:
    """/pass, /echo and /run."""
    reg = registry.register
    reg("pass", _pass, aliases=("return",), unnamed_types=("string", "closure"), help="Passes")
    reg(
        "echo",
        _echo,
        raw_quotes=True,
        named_args=(
            "title",
            NamedArgSpec("severity", enum=("info", "warning", "error", "success")),
            "timeout",
            "extendedTimeout",
            "preventDuplicates",
            "awaitDismissal",
            "cssClass",
            "color",
            NamedArgSpec("escapeHtml", types=("bool",), default="true"),
            NamedArgSpec("onClick", types=("closure",)),
            NamedArgSpec("raw", types=("bool",), default="true"),
        ),
        help="Shows a toast with the text; returns the text.",
    )
    reg(
        "run",
        _run,
        aliases=("call", "exec"),
        unnamed_types=("closure", "string"),
        help="Runs a closure, a closure variable or a Quick Reply (Set.Label).",
    )


def _register_variables(registry: CommandRegistry) -> None:
    """/let and /var: scoped variables."""
    reg = registry.register
    reg(
        "let",
        _let,
        named_args=(NamedArgSpec("key", types=("variable",)),),
        unnamed_types=("variable", "string", "closure"),
        split=True,
        split_count=1,
        help="Declares a scoped variable.",
    )
    reg(
        "var",
        _var,
        named_args=(NamedArgSpec("key", types=("variable",)), "index", "as"),
        unnamed_types=("variable", "string", "closure"),
        split=True,
        split_count=1,
        help="Sets or gets a scoped variable.",
    )


def _register_control(registry: CommandRegistry) -> None:
    """Conditions, loops, /abort and /delay."""
    reg = registry.register
    condition_args = (
        "left",
        "right",
        "a",
        "b",
        NamedArgSpec("rule", enum=("eq", "neq", "in", "nin", "gt", "gte", "lt", "lte", "not")),
    )
    reg(
        "if",
        _if,
        named_args=(*condition_args, NamedArgSpec("else", types=("closure", "subcommand"))),
        unnamed_types=("closure", "subcommand"),
        split=True,
        help="Runs the closure when the condition holds (else= otherwise).",
    )
    reg(
        "while",
        _while,
        named_args=(*condition_args, NamedArgSpec("guard", types=("bool",))),
        unnamed_types=("closure", "subcommand"),
        split=True,
        help="Runs the closure while the condition holds (at most 100 times unless guard=off).",
    )
    reg(
        "times",
        _times,
        named_args=(NamedArgSpec("guard", types=("bool",)),),
        unnamed_types=("number", "closure", "subcommand"),
        split=True,
        split_count=1,
        help="Runs the closure N times ({{timesIndex}}; at most 100 unless guard=off).",
    )
    reg(
        "abort",
        _abort,
        named_args=(NamedArgSpec("quiet", types=("bool",), default="true"),),
        help="Stops the script.",
    )
    reg("delay", _delay, aliases=("wait", "sleep"), unnamed_types=("number",), help="Waits ms.")


def _register_closures_and_parser(registry: CommandRegistry) -> None:
    """Closures as text, parser flags, breakpoints."""
    reg = registry.register
    reg("closure-serialize", _serialize, unnamed_types=("closure",), help="A closure's text.")
    reg("closure-deserialize", _deserialize, help="A closure from its text.")
    reg("parser-flag", _noop, split=True, help="Switches a parser flag for the rest of the text.")
    reg("breakpoint", _noop, unnamed_types=(), help="A breakpoint of the debugger (no-op).")
