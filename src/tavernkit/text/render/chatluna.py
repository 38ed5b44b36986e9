"""ChatLuna's template dialect, evaluated as ChatLuna 1.3.36 evaluates it.

:func:`evaluate_template` renders the nodes of :mod:`.chatluna_parse` with the semantics of
``@chatluna/shared-prompt-renderer`` 1.0.5, JavaScript values included (:mod:`.chatluna_js`):

- a bare name is the variable (loop variables first, then the render's variables, then what
  the variables object inherits from ``Object.prototype``); a variable that is a function is
  called at every reference (a returned awaitable is awaited). A name that is no variable is
  the function provider of that name called with no arguments (a throw there renders ``''``),
  else ``''``. A member or index that is a function is called with the object as ``this``.
- a call ``f(a, b)`` passes every argument through ``String()`` and calls the provider as
  ``(args, variables, configurable)``; ``variables`` includes the loop variables in scope.
- an expression tag renders ``String(value ?? '')``; any error in it renders ``''`` (a warning
  says why) and the tag reports no names. An error in a block header fails the whole render
  (:class:`~tavernkit.errors.TemplateError`).
- ``{for x in xs}`` loops over a list (anything else renders ``''``); ``{while c}`` stops after
  10,000 rounds; ``{repeat n}`` repeats ``floor(Number(n))`` times (NaN or negative: ``''``).
  tavernkit differs on purpose in one place: an infinite count (``{repeat 1 / 0}``) renders
  ``''`` with a warning, where ChatLuna loops until the process runs out of memory.
- ``max_depth``: a block body renders one level deeper and a tag at the limit renders ``''``.
  Values and function results are never rendered again.
- the names a render reports are collected from the expression tree of each tag and block
  header once it evaluated without error, as ChatLuna collects them: identifiers, a called
  function's name before its arguments, an object's name (not its properties), both sides of
  an index and all three parts of a conditional (the branch not taken too); first-seen order.

The evaluation also keeps the clock of ChatLuna's asynchronous evaluator (:attr:`ChatLunaEvaluation.
ticks`, in promise ticks). ChatLuna renders a preset's messages (and ``renderMessages``') all at
once, so their provider calls interleave by that clock and their names are collected in the
order the renders finish: :class:`Interleaving` replays that order with one thread per render.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import tavernkit.text.render.chatluna_js as js
from tavernkit.errors import ExprError, TemplateError
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render.chatluna_functions import BuiltinFunction, builtin_functions
from tavernkit.text.render.chatluna_js import UNDEFINED
from tavernkit.text.render.chatluna_js_properties import get_property, global_name
from tavernkit.text.render.chatluna_parse import (
    Binary,
    Call,
    Expr,
    Expression,
    ForBlock,
    Identifier,
    IfBlock,
    Index,
    Literal,
    Member,
    Node,
    RepeatBlock,
    Ternary,
    Text,
    Unary,
    WhileBlock,
    parse_template,
)
from tavernkit.text.render.context import AsyncBridge, RenderContext
from tavernkit.text.render.syntax import SyntaxResult
from tavernkit.text.render.types import FunctionProvider, RenderOptions

__all__ = [
    "MACROTASK_TICKS",
    "MAX_WHILE_ROUNDS",
    "ChatLunaEvaluation",
    "ChatLunaSyntax",
    "Interleaving",
    "collect_names",
    "evaluate_template",
    "js_display",
]

MAX_WHILE_ROUNDS = 10_000


def js_display(value: Any) -> str:
    """How a tag prints a value: ``String(value ?? '')``."""
    return "" if value is None or value is UNDEFINED else js.to_string(value)


def collect_names(expr: Expr, out: dict[str, None]) -> None:
    """The names ChatLuna reports for an expression, in its order (pre-order, left first)."""
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Identifier):
            out.setdefault(node.name)
        elif isinstance(node, Member):
            stack.append(node.target)
        elif isinstance(node, Index):
            stack.extend((node.index, node.target))
        elif isinstance(node, Call):
            stack.extend(reversed(node.args))
            stack.append(node.callee)
        elif isinstance(node, Binary):
            stack.extend((node.right, node.left))
        elif isinstance(node, Unary):
            stack.append(node.operand)
        elif isinstance(node, Ternary):
            stack.extend((node.otherwise, node.then, node.condition))


def _is_awaitable(value: Any) -> bool:
    return inspect.isawaitable(value)


#: Ticks a wait on real asynchronous work (a timer, the network) stands for: it ends after
#: every pending microtask, so after anything a synchronous evaluation can reach.
MACROTASK_TICKS = 1_000_000_000


class Interleaving:
    """Runs the side effects of concurrent renders in ChatLuna's order.

    ChatLuna renders a preset's (or ``renderMessages``') templates at once, so their provider
    calls interleave by promise tick: a call at tick 3 of the second message comes before one
    at tick 5 of the first. Here each render runs in its own thread and asks
    :meth:`turn` before each call (and before it finishes): it goes on only when every other
    render has finished or waits at a later ``(tick, index)``. A render waiting on real
    asynchronous work is parked and holds no one up.
    """

    _RUNNING: tuple[int, int] = (-1, -1)
    _DONE: tuple[int, int] = (2**62, 2**62)

    def __init__(self, count: int) -> None:
        self._condition = threading.Condition()
        self._states: list[tuple[int, int]] = [self._RUNNING] * count
        #: indexes in the order their renders finished
        self.finished: list[int] = []

    def _mine(self, index: int) -> bool:
        me = self._states[index]
        return all(
            other != self._RUNNING and other >= me
            for number, other in enumerate(self._states)
            if number != index
        )

    def turn(self, index: int, tick: int) -> None:
        with self._condition:
            self._states[index] = (tick, index)
            self._condition.notify_all()
            self._condition.wait_for(lambda: self._mine(index))
            self._states[index] = self._RUNNING

    @contextlib.contextmanager
    def parked(self, index: int) -> Iterator[None]:
        with self._condition:
            self._states[index] = self._DONE
            self._condition.notify_all()
        try:
            yield
        finally:
            with self._condition:
                self._states[index] = self._RUNNING

    def finish(self, index: int, tick: int) -> None:
        self.turn(index, tick)
        with self._condition:
            self.finished.append(index)
            self._states[index] = self._DONE
            self._condition.notify_all()

    def abandon(self, index: int) -> None:
        with self._condition:
            self._states[index] = self._DONE
            self._condition.notify_all()


class ChatLunaEvaluation:
    """One render: the variables in scope, the function providers and what was seen.

    ``ticks`` runs like the microtask clock of ChatLuna's asynchronous evaluator: each
    ``await`` of a sub-evaluation costs one tick once the sub-evaluation is done, arguments
    are awaited together (``Promise.all``), and an error stops the clock where it was thrown.
    """

    def __init__(
        self,
        variables: MutableMapping[str, Any],
        functions: Mapping[str, FunctionProvider],
        configurable: Mapping[str, Any],
        *,
        max_depth: int = 10,
        bridge: AsyncBridge | None = None,
    ) -> None:
        self.scope: ChainMap[str, Any] = ChainMap(variables)
        self.functions = functions
        self.configurable = configurable
        self.max_depth = max_depth
        self.bridge = bridge or AsyncBridge()
        self.names: dict[str, None] = {}
        self.warnings: list[str] = []
        self.ticks = 0
        #: the scopes enclosing the loops being rendered (a loop scope's prototype)
        self._enclosing: list[ChainMap[str, Any]] = []
        #: set when this render runs beside others (``Interleaving``), with its index
        self.interleaving: Interleaving | None = None
        self.index = 0

    # -- names --------------------------------------------------------------------------

    def _effect(self) -> None:
        """Before a call that may have a side effect: wait for this render's turn."""
        if self.interleaving is not None:
            self.interleaving.turn(self.index, self.ticks)

    def _settle(self, value: Any) -> Any:
        """An awaitable's value: real asynchronous work, done after every microtask."""
        if not _is_awaitable(value):
            return value
        if self.interleaving is None:
            value = self.bridge.resolve(value)
        else:
            with self.interleaving.parked(self.index):
                value = self.bridge.resolve(value)
        self.ticks += MACROTASK_TICKS
        return value

    def _resolve(self, value: Any) -> Any:
        """A function's result; an awaitable returned from an async function is adopted,
        which costs ChatLuna two ticks."""
        if _is_awaitable(value):
            value = self._settle(value)
            self.ticks += 2
        return value

    def _lookup(self, name: str) -> Any:
        if name in self.scope:
            return self.scope[name]
        if name == "__proto__" and self._enclosing:
            return self._enclosing[-1]  # a loop's scope inherits from the enclosing one
        return global_name(name)

    def _provider(self, name: str) -> Callable[[list[str]], Any] | None:
        provider = self.functions.get(name)
        if provider is not None:
            scope, configurable = self.scope, self.configurable

            def call(args: list[str]) -> Any:
                return provider(args, scope, configurable)

            return call
        inherited = global_name(name)
        if isinstance(inherited, js.JsFunction):
            scope, configurable = self.scope, self.configurable
            return lambda args: inherited(UNDEFINED, [args, scope, configurable])
        return None

    def _identifier(self, name: str) -> Any:
        value = self._lookup(name)
        if value is UNDEFINED:
            provider = self._provider(name) if name in self.functions else None
            if provider is None:
                return ""
            try:
                self._effect()
                result = self._settle(provider([]))
            except Exception as exc:
                self.warnings.append(f'Failed to call function "{name}" as variable: {exc}')
                return ""
            self.ticks += 1
            return result
        if js.is_function(value):
            self._effect()
            return self._resolve(js.call_function(value, UNDEFINED, []))
        return value

    # -- expressions --------------------------------------------------------------------

    def _awaited(self, expr: Expr) -> Any:
        """``await evaluateExpression(expr)``: the value, one tick after it is ready."""
        try:
            return self.evaluate(expr)
        finally:
            self.ticks += 1  # a rejected one is awaited too before its error goes on

    def evaluate(self, expr: Expr) -> Any:
        if isinstance(expr, Literal):
            return expr.value
        if isinstance(expr, Identifier):
            return self._identifier(expr.name)
        if isinstance(expr, Member):
            return self._member(self._awaited(expr.target), expr.name)
        if isinstance(expr, Index):
            target = self._awaited(expr.target)
            return self._member(target, self._awaited(expr.index))
        if isinstance(expr, Call):
            return self._call(expr)
        if isinstance(expr, Unary):
            value = self._awaited(expr.operand)
            if expr.op == "!":
                return not js.truthy(value)
            number = js.to_number(value)
            return -number if expr.op == "-" else number
        if isinstance(expr, Ternary):
            condition = self._awaited(expr.condition)
            return self._awaited(expr.then if js.truthy(condition) else expr.otherwise)
        return self._binary(expr)

    def _member(self, target: Any, key: Any) -> Any:
        if target is None or target is UNDEFINED:
            return ""
        value = get_property(target, key)
        if js.is_function(value):
            # a method's result as it is (``undefined`` stays undefined); a property ``?? ''``
            self._effect()
            return self._resolve(js.call_function(value, target, []))
        return "" if value is None or value is UNDEFINED else value

    def _arguments(self, args: tuple[Expr, ...]) -> list[str]:
        """The arguments, each through ``String()``, awaited together as ``Promise.all``:
        every one is evaluated (side effects included) and the one that fails first, in
        ticks, is the error."""
        if not args:
            self.ticks += 1
            return []
        start = finish = self.ticks
        values: list[str] = []
        failure: tuple[int, Exception] | None = None
        for arg in args:
            self.ticks = start  # they all start together
            try:
                value = self.evaluate(arg)
            except Exception as exc:
                if failure is None or self.ticks < failure[0]:
                    failure = (self.ticks, exc)
                continue
            finish = max(finish, self.ticks)
            values.append(js.to_string(value))
        if failure is not None:
            self.ticks = failure[0] + 2  # the rejection reaches Promise.all, then its await
            raise failure[1]
        self.ticks = finish + 2  # the last one's reaction settles Promise.all, then its await
        return values

    def _call(self, expr: Call) -> Any:
        if isinstance(expr.callee, Identifier):
            name = expr.callee.name
            provider = self._provider(name)
            if provider is None:
                raise ExprError(f"Unknown function: {name}")
            args = self._arguments(expr.args)
            self._effect()
            result = self._settle(provider(args))
            self.ticks += 1
            return result
        callee = self._awaited(expr.callee)
        if not js.is_function(callee):
            raise ExprError("Expression is not callable")
        args = self._arguments(expr.args)
        self._effect()
        result = self._settle(js.call_function(callee, UNDEFINED, list(args)))
        self.ticks += 2
        return result

    def _binary(self, expr: Binary) -> Any:
        # a left-leaning chain (``1 + 2 + ... + n``) is walked as a loop, not a recursion
        chain: list[Binary] = []
        node: Expr = expr
        while isinstance(node, Binary):
            chain.append(node)
            node = node.left
        level = 0
        try:
            value = self._awaited(node)
            for level, link in enumerate(reversed(chain)):
                if level:
                    self.ticks += 1  # the await of this link's left side, the previous link
                right = self._awaited(link.right)  # both sides, always: no short circuit
                value = _apply(link.op, value, right)
        except Exception:
            self.ticks += len(chain) - 1 - level  # each enclosing link awaits the rejection
            raise
        return value

    # -- rendering ----------------------------------------------------------------------

    def render(self, nodes: list[Node], depth: int) -> str:
        parts: list[str] = []
        for node in nodes:
            parts.append(self._node(node, depth))
            self.ticks += 1  # await renderToken
        return "".join(parts)

    def _node(self, node: Node, depth: int) -> str:
        if depth >= self.max_depth:
            return ""
        if isinstance(node, Text):
            return node.text
        if isinstance(node, Expression):
            return self._expression(node)
        if isinstance(node, IfBlock):
            return self._if(node, depth)
        if isinstance(node, ForBlock):
            return self._for(node, depth)
        if isinstance(node, WhileBlock):
            return self._while(node, depth)
        return self._repeat(node, depth)

    def _header(self, expr: Expr) -> Any:
        """A block header: evaluated without a guard (an error fails the render); its names
        are reported once it evaluated."""
        try:
            value = self._awaited(expr)
        except TemplateError:
            raise
        except Exception as exc:
            raise TemplateError(f"in a block header: {exc}") from exc
        collect_names(expr, self.names)
        return value

    def _if(self, node: IfBlock, depth: int) -> str:
        for condition, body in node.branches:
            truthy = js.truthy(self._header(condition))
            self.ticks += 1  # isTruthy is one more async function
            if truthy:
                return self.render(body, depth + 1)
        return self.render(node.otherwise, depth + 1) if node.otherwise is not None else ""

    def _for(self, node: ForBlock, depth: int) -> str:
        items = self._header(node.iterable)
        if not isinstance(items, list | tuple):
            return ""
        out: list[str] = []
        outer = self.scope
        self._enclosing.append(outer)
        try:
            for item in items:
                self.scope = outer.new_child({node.name: item})
                out.append(self.render(node.body, depth + 1))
        finally:
            self.scope = outer
            self._enclosing.pop()
        return "".join(out)

    def _while(self, node: WhileBlock, depth: int) -> str:
        parts: list[str] = []
        while len(parts) < MAX_WHILE_ROUNDS:
            truthy = js.truthy(self._header(node.condition))
            self.ticks += 1
            if not truthy:
                break
            parts.append(self.render(node.body, depth + 1))
        else:
            self.warnings.append(f"{{while}}: stopped after {MAX_WHILE_ROUNDS} rounds")
        return "".join(parts)

    def _repeat(self, node: RepeatBlock, depth: int) -> str:
        value = self._header(node.count)
        count = js.to_number(value)
        if count != count or count < 0:
            self.warnings.append(f"{{repeat}}: the count is not a number: {js.to_string(value)}")
            return ""
        if math.isinf(count):
            # ChatLuna loops until the process dies; refusing is tavernkit's choice
            self.warnings.append("{repeat}: an infinite count is refused")
            return ""
        return "".join(self.render(node.body, depth + 1) for _ in range(int(count)))

    def _expression(self, node: Expression) -> str:
        try:
            value = self._awaited(node.expr)
        except Exception as exc:  # ChatLuna: any error in a tag renders it empty
            reason = str(exc) if isinstance(exc, ExprError) else f"{type(exc).__name__}: {exc}"
            self.warnings.append(f"{{{node.raw.strip()}}}: {reason}")
            return ""
        collect_names(node.expr, self.names)
        return js_display(value)


def _apply(op: str, left: Any, right: Any) -> Any:
    if op == "+":
        return js.add(left, right)
    if op in ("-", "*", "/", "%"):
        return js.arithmetic(op, left, right)
    if op == "==":
        return js.strict_equal(left, right)
    if op == "!=":
        return not js.strict_equal(left, right)
    if op == "&&":
        return right if js.truthy(left) else left
    if op == "||":
        return left if js.truthy(left) else right
    if op in ("<", ">", "<=", ">="):
        return js.compare(op, left, right)
    raise ExprError(f"Unknown operator: {op}")


def evaluate_template(source: str, evaluation: ChatLunaEvaluation) -> str:
    """Render ``source`` (``max_depth <= 0``: the source unrendered); a malformed block header
    or a failing one is a :class:`TemplateError`."""
    if evaluation.max_depth <= 0:
        return source
    try:
        nodes = parse_template(source)
    except ExprError as exc:
        raise TemplateError(f"malformed block header: {exc}") from None
    return evaluation.render(nodes, 0)


class ChatLunaSyntax:
    """The dialect as a :class:`~tavernkit.text.render.syntax.TemplateSyntax` of the general
    renderer (``RenderOptions(syntax="chatluna")``): the renderer's providers first, then the
    dialect's built-ins (:mod:`.chatluna_functions`) on the render's environment."""

    def __init__(self, builtins: Mapping[str, BuiltinFunction] | None = None) -> None:
        self.builtins = builtin_functions() if builtins is None else dict(builtins)

    def render(self, source: str, context: RenderContext, options: RenderOptions) -> SyntaxResult:
        if options.max_depth <= 0 or ("{" not in source and "}" not in source):
            return SyntaxResult(source)
        env = options.env if options.env is not None else MacroEnv()
        functions: dict[str, FunctionProvider] = {
            name: _bound(builtin, env) for name, builtin in self.builtins.items()
        }
        functions.update(context.functions)
        evaluation = ChatLunaEvaluation(
            context.variables,
            functions,
            context.configurable,
            max_depth=options.max_depth,
            bridge=context.bridge,
        )
        text = evaluate_template(source, evaluation)
        context.used.update(evaluation.names)
        return SyntaxResult(text, tuple(evaluation.warnings))


def _bound(builtin: BuiltinFunction, env: MacroEnv) -> FunctionProvider:
    def provider(args: list[str], variables: Mapping[str, Any], configurable: Any) -> Any:
        return builtin(args, env, configurable)

    return provider
