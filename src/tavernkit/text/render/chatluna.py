"""ChatLuna's template dialect as a renderer syntax (``RenderOptions(syntax="chatluna")``).

:class:`ChatLunaSyntax` evaluates the nodes of :mod:`.chatluna_parse` with ChatLuna's
semantics (JavaScript values: strict ``==``, ``+`` concatenating strings, ``&&``/``||``
returning an operand with both sides evaluated, JS truthiness and ``String()``):

- a bare name is the variable; when there is none, the function provider of that name called
  with no arguments (variables win: ``{date}`` is the variable ``date`` if one is set);
  otherwise ``''``. A call ``f(a, b)`` passes every argument through ``String()``; an unknown
  function, or any error inside an expression tag, renders that tag as ``''`` (a warning says
  why); an error in a block condition fails the whole render (a
  :class:`~tavernkit.errors.TemplateError`), as in ChatLuna.
- ``{for x in xs}`` loops over a list (anything else renders ``''``); ``{while c}`` stops after
  10,000 rounds; ``{repeat n}`` repeats ``floor(n)`` times (NaN or negative: ``''``).
- ``max_depth`` (default 10): a block body renders one level deeper and a tag at the limit
  renders ``''``; ``max_depth <= 0`` returns the source unrendered. Values and function
  results are never rendered again.
- the names a render reports are the identifiers and function names it evaluated, in
  first-seen order, counted only once their tag evaluated without error.

Function names resolve in the context first (the renderer's registered and per-call providers,
``url`` when enabled), then the dialect's built-ins (:mod:`.chatluna_functions`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from tavernkit.errors import ExprError, TemplateError
from tavernkit.jscompat import js_number_to_string, js_strict_eq, js_to_number, js_truthy
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render.chatluna_functions import BuiltinFunction, builtin_functions
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
from tavernkit.text.render.context import RenderContext
from tavernkit.text.render.syntax import SyntaxResult
from tavernkit.text.render.types import RenderOptions

__all__ = ["MAX_WHILE_ROUNDS", "ChatLunaSyntax", "js_display"]

MAX_WHILE_ROUNDS = 10_000


class _Undefined:
    __slots__ = ()

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()


def js_display(value: Any) -> str:
    """``String(value)`` with JavaScript's forms (``undefined`` is ``''`` here, as a call
    argument and as ``String(value ?? '')``)."""
    if value is UNDEFINED or value is None:
        return "" if value is UNDEFINED else "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_to_string(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return ",".join("" if v is None or v is UNDEFINED else js_display(v) for v in value)
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any) -> float:
    if value is UNDEFINED:
        return math.nan
    if isinstance(value, list | tuple | Mapping):
        return js_to_number(js_display(value))
    return js_to_number(value)


def _primitive_string(value: Any) -> bool:
    """Whether ``+`` concatenates: a string, or an object (arrays, maps) whose primitive is."""
    return isinstance(value, str | list | tuple | Mapping)


class _Evaluation:
    """One render: the context, the scopes of enclosing ``for`` loops and the warnings."""

    def __init__(
        self,
        context: RenderContext,
        builtins: Mapping[str, BuiltinFunction],
        env: MacroEnv,
        max_depth: int,
    ) -> None:
        self.context = context
        self.builtins = builtins
        self.env = env
        self.max_depth = max_depth
        self.scopes: list[dict[str, Any]] = []
        self.warnings: list[str] = []

    # -- names --------------------------------------------------------------------------

    def _seen(self, name: str) -> None:
        self.context.used.setdefault(name)

    def _function(self, name: str) -> Callable[[list[str]], Any] | None:
        if self.context.has_function(name):
            context = self.context

            def provided(args: list[str]) -> Any:
                return context.call(name, args)

            return provided
        builtin = self.builtins.get(name)
        if builtin is None:
            return None
        env, configurable = self.env, self.context.configurable

        def built(args: list[str]) -> Any:
            return builtin(args, env, configurable)

        return built

    def identifier(self, name: str) -> Any:
        self._seen(name)
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if self.context.has_variable(name):
            return self.context.variable(name)
        function = self._function(name)
        if function is None:
            return ""
        try:
            return function([])
        except Exception as exc:
            self.warnings.append(f"{{{name}}}: {type(exc).__name__}: {exc}")
            return ""

    # -- expressions --------------------------------------------------------------------

    def evaluate(self, expr: Expr) -> Any:
        if isinstance(expr, Literal):
            return expr.value
        if isinstance(expr, Identifier):
            return self.identifier(expr.name)
        if isinstance(expr, Member):
            return self._member(self.evaluate(expr.target), expr.name)
        if isinstance(expr, Index):
            target = self.evaluate(expr.target)
            return self._member(target, self.evaluate(expr.index))
        if isinstance(expr, Call):
            return self._call(expr)
        if isinstance(expr, Unary):
            value = self.evaluate(expr.operand)
            if expr.op == "!":
                return not self.truthy(value)
            number = _number(value)
            return -number if expr.op == "-" else number
        if isinstance(expr, Ternary):
            chosen = expr.then if self.truthy(self.evaluate(expr.condition)) else expr.otherwise
            return self.evaluate(chosen)
        return self._binary(expr)

    @staticmethod
    def truthy(value: Any) -> bool:
        return value is not UNDEFINED and js_truthy(value)

    def _member(self, target: Any, key: Any) -> Any:
        if target is None or target is UNDEFINED:
            return ""
        value: Any = UNDEFINED
        if isinstance(target, Mapping):
            value = target.get(js_display(key), UNDEFINED)
        elif isinstance(target, list | tuple | str):
            if key == "length":
                value = len(target)
            else:
                number = _number(key)
                if number == number and number.is_integer() and 0 <= number < len(target):
                    value = target[int(number)]
        if callable(value):
            value = self.context.bridge.resolve(value())
        return "" if value is UNDEFINED or value is None else value

    def _call(self, expr: Call) -> Any:
        if isinstance(expr.callee, Identifier):
            name = expr.callee.name
            function = self._function(name)
            if function is None:
                raise ExprError(f"Unknown function: {name}")
            args = [js_display(self.evaluate(arg)) for arg in expr.args]
            self._seen(name)
            return function(args)
        callee = self.evaluate(expr.callee)
        if not callable(callee):
            raise ExprError("Expression is not callable")
        args = [js_display(self.evaluate(arg)) for arg in expr.args]
        return self.context.bridge.resolve(callee(args))

    def _binary(self, expr: Binary) -> Any:
        left = self.evaluate(expr.left)
        right = self.evaluate(expr.right)  # both sides, always (no short circuit)
        op = expr.op
        if op == "&&":
            return right if self.truthy(left) else left
        if op == "||":
            return left if self.truthy(left) else right
        if op in ("==", "!="):
            same = (left is UNDEFINED and right is UNDEFINED) or (
                left is not UNDEFINED and right is not UNDEFINED and js_strict_eq(left, right)
            )
            return same if op == "==" else not same
        if op == "+":
            if _primitive_string(left) or _primitive_string(right):
                return js_display(left) + js_display(right)
            return _number(left) + _number(right)
        if op in ("<", ">", "<=", ">="):
            if isinstance(left, str) and isinstance(right, str):
                a: Any = left
                b: Any = right
            else:
                a, b = _number(left), _number(right)
                if a != a or b != b:
                    return False
            return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        a, b = _number(left), _number(right)
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b != 0:
                return a / b
            if a == 0 or a != a:
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        if b == 0 or a != a or math.isinf(a):
            return math.nan
        return math.fmod(a, b)

    # -- rendering ----------------------------------------------------------------------

    def render(self, nodes: list[Node], depth: int) -> str:
        return "".join(self._node(node, depth) for node in nodes)

    def _node(self, node: Node, depth: int) -> str:
        if depth >= self.max_depth:
            return ""
        if isinstance(node, Text):
            return node.text
        if isinstance(node, Expression):
            return self._expression(node)
        if isinstance(node, IfBlock):
            for condition, body in node.branches:
                if self.truthy(self._condition(condition)):
                    return self.render(body, depth + 1)
            return self.render(node.otherwise, depth + 1) if node.otherwise else ""
        if isinstance(node, ForBlock):
            items = self._condition(node.iterable)
            if not isinstance(items, list | tuple):
                return ""
            out = []
            for item in items:
                self.scopes.append({node.name: item})
                try:
                    out.append(self.render(node.body, depth + 1))
                finally:
                    self.scopes.pop()
            return "".join(out)
        if isinstance(node, WhileBlock):
            parts: list[str] = []
            while self.truthy(self._condition(node.condition)):
                if len(parts) >= MAX_WHILE_ROUNDS:
                    self.warnings.append(f"{{while}}: stopped after {MAX_WHILE_ROUNDS} rounds")
                    break
                parts.append(self.render(node.body, depth + 1))
            return "".join(parts)
        assert isinstance(node, RepeatBlock)
        count = _number(self._condition(node.count))
        if count != count or count < 0:
            self.warnings.append("{repeat}: the count is not a non-negative number")
            return ""
        if math.isinf(count):
            self.warnings.append("{repeat}: an infinite count")
            return ""
        return "".join(self.render(node.body, depth + 1) for _ in range(int(count)))

    def _condition(self, expr: Expr) -> Any:
        """A block header: evaluated without a guard, so an error fails the render."""
        try:
            return self.evaluate(expr)
        except ExprError as exc:
            raise TemplateError(f"in a block condition: {exc}") from None

    def _expression(self, node: Expression) -> str:
        used = self.context.used
        before = len(used)
        try:
            value = self.evaluate(node.expr)
        except TemplateError:
            raise
        except Exception as exc:
            # a tag that threw reports none of its names
            for name in list(used)[before:]:
                del used[name]
            reason = str(exc) if isinstance(exc, ExprError) else f"{type(exc).__name__}: {exc}"
            self.warnings.append(f"{{{node.raw.strip()}}}: {reason}")
            return ""
        return "" if value is None else js_display(value)  # String(value ?? '')


class ChatLunaSyntax:
    """The dialect as a :class:`~tavernkit.text.render.syntax.TemplateSyntax`."""

    def __init__(self, builtins: Mapping[str, BuiltinFunction] | None = None) -> None:
        self.builtins = builtin_functions() if builtins is None else dict(builtins)

    def render(self, source: str, context: RenderContext, options: RenderOptions) -> SyntaxResult:
        if options.max_depth <= 0 or ("{" not in source and "}" not in source):
            return SyntaxResult(source)
        try:
            nodes = parse_template(source)
        except ExprError as exc:
            raise TemplateError(f"malformed block condition: {exc}") from None
        env = options.env if options.env is not None else MacroEnv()
        evaluation = _Evaluation(context, self.builtins, env, options.max_depth)
        text = evaluation.render(nodes, 0)
        return SyntaxResult(text, tuple(evaluation.warnings))
