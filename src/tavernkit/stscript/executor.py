"""Running a parsed script: argument substitution, pipes, closures, breaks, aborts, budgets.

One :class:`ScriptRunner` runs one script and everything it starts (sub-commands, closures,
quick replies), sharing the abort state, the step count and the deadline. For each command:
named arguments are evaluated (closures stay closures unless followed by ``()``, text goes
through the macro engine with the script's own macros: ``{{pipe}}``, ``{{var::name}}``,
``{{arg::name}}``, ``{{timesIndex}}``), then the unnamed argument — or, when the command has
none and is not the first of its closure, the pipe (unless ``||`` came before it) — then the
command runs and its result becomes the pipe (``None`` → ``''``, JSON values as JSON text).

Budgets: ``max_steps`` commands per run, ``max_seconds`` of wall time (checked between
commands, with the injected monotonic clock; time spent generating or waiting for the user's
answer is not counted) and ``max_depth`` nested closures; past one the run
stops with :class:`~tavernkit.errors.ScriptBudgetExceeded`. A failing command becomes a
:class:`~tavernkit.errors.ScriptError` with SillyTavern's message and position, never a raw
exception.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.errors import (
    AccessError,
    MacroRuntimeError,
    RequestAborted,
    ScriptBudgetExceeded,
    ScriptError,
    TavernKitError,
)
from tavernkit.jscompat import js_json_stringify, js_string
from tavernkit.models.quick_reply import QuickReply, QuickReplySet
from tavernkit.stscript.host import Answer, GenerationRequest, Question, ScriptHost, Toast
from tavernkit.stscript.parser import parse_script
from tavernkit.stscript.quick_replies import click_text
from tavernkit.stscript.registry import Command, CommandRegistry
from tavernkit.stscript.scope import (
    UNSET,
    BreakController,
    ClosureResult,
    Scope,
    ScriptClosure,
    pipe_text,
)
from tavernkit.stscript.tree import (
    BreakNode,
    ClosureNode,
    CommandNode,
    CommandShape,
    UnnamedArg,
    script_error,
)
from tavernkit.text.macros import MacroEnv, render_macros

__all__ = ["Budget", "CommandCall", "ScriptRunner", "unescape_braces"]

_BRACES = re.compile(r"\\([{}])")
_SYSTEM_RANDOM = random.Random()


def unescape_braces(value: Any) -> Any:
    if isinstance(value, str) and "\\" in value:
        return _BRACES.sub(r"\1", value)
    return value


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run: commands executed, wall seconds, closure nesting."""

    max_steps: int = 100_000
    max_seconds: float = 60.0
    max_depth: int = 100


class _Random:
    """The runner's generator as the macro engine's ``RandomSource``."""

    __slots__ = ("draw",)

    def __init__(self, draw: Callable[[], float]) -> None:
        self.draw = draw

    def random(self) -> float:
        return self.draw()


@dataclass(eq=False)
class CommandCall:
    """What a command function gets: its arguments, the scope, the runner (and the host)."""

    runner: ScriptRunner
    command: Command
    node: CommandNode
    args: dict[str, Any]
    value: Any
    has_unnamed: bool
    scope: Scope
    break_ctl: BreakController | None = None

    @property
    def host(self) -> ScriptHost:
        return self.runner.host

    def arg(self, name: str) -> Any:
        """A named argument's value, or None when it was not given (or given empty-handed)."""
        return self.args.get(name)

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.args.get(name)
        if value is None:
            return default
        return pipe_text(value)

    def value_text(self) -> str:
        """The unnamed argument as one string (a split list joined by spaces)."""
        value = self.value
        if value is None:
            return ""
        if isinstance(value, list):
            return " ".join(pipe_text(v) for v in value)
        return pipe_text(value)

    def value_list(self) -> list[Any]:
        value = self.value
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    def toast(self, kind: str, message: str, title: str | None = None, **options: Any) -> None:
        self.host.toast(Toast(kind, message, title, options or None))


@dataclass(eq=False)
class ScriptRunner:
    """Runs scripts on one host (see the module docstring)."""

    host: ScriptHost
    registry: CommandRegistry
    budget: Budget = field(default_factory=Budget)
    rng: Callable[[], float] | None = None
    monotonic: Callable[[], float] = time.monotonic
    parser_flags: dict[int, bool] | None = None
    steps: int = 0
    depth: int = 0
    sleeper: Callable[[float], Awaitable[None]] = asyncio.sleep
    aborted: bool = False
    abort_quiet: bool = True
    abort_reason: str | None = None
    _deadline: float | None = None

    # -- entry points -----------------------------------------------------------------------

    def lookup(self, name: str) -> CommandShape | None:
        return self.registry.get(name)

    def parse(self, text: str, flags: dict[int, bool] | None = None) -> ClosureNode:
        return parse_script(text, self.lookup, flags=flags or self.parser_flags)

    async def run(
        self,
        text: str,
        *,
        scope: Scope | None = None,
        flags: dict[int, bool] | None = None,
        handle_parser_errors: bool = False,
    ) -> ClosureResult | None:
        """``executeSlashCommandsWithOptions``: parse ``text`` and run it (``scope`` is the
        parent of the script's own scope). An empty text returns None. With
        ``handle_parser_errors`` a text that does not parse shows an error toast and returns
        an empty result, as a quick reply run by ``/run`` does; otherwise it raises."""
        if not text:
            return None
        if self._deadline is None:
            self._deadline = self.monotonic() + self.budget.max_seconds
        try:
            root = self.parse(text, flags)
        except ScriptError as exc:
            if handle_parser_errors and exc.name == "SlashCommandParserError":
                self.host.toast(
                    Toast(
                        "error",
                        f"{exc.message} (line {exc.line}, column {exc.column})",
                        "SlashCommandParserError",
                        {"escapeHtml": False},
                    )
                )
                return ClosureResult()
            raise
        closure = ScriptClosure(root, Scope(scope))
        result = await self.run_closure(closure)
        if result.is_aborted and not result.is_quietly_aborted and self.depth == 0:
            self.host.toast(
                Toast("warning", result.abort_reason or "", "Command execution aborted", None)
            )
            self.abort_quiet = True
        return result

    # -- closures ---------------------------------------------------------------------------

    def aborted_result(self) -> ClosureResult:
        return ClosureResult(
            pipe=None,
            is_aborted=True,
            is_quietly_aborted=self.abort_quiet,
            abort_reason=self.abort_reason,
        )

    def abort(self, reason: str, *, quiet: bool = True) -> None:
        self.aborted = True
        self.abort_reason = reason
        self.abort_quiet = quiet

    async def run_closure(self, closure: ScriptClosure) -> ClosureResult:
        """Run a copy of ``closure`` (its arguments declared, provided ones set)."""
        if self.depth >= self.budget.max_depth:
            raise ScriptBudgetExceeded(
                f"Script nesting deeper than {self.budget.max_depth} closures",
                budget="depth",
                limit=self.budget.max_depth,
            )
        self.depth += 1
        try:
            return await self._run_closure(closure.run_copy())
        finally:
            self.depth -= 1

    async def _run_closure(self, closure: ScriptClosure) -> ClosureResult:
        node = closure.node
        scope = closure.scope
        break_ctl = closure.break_ctl
        for arg in node.arguments:
            value = await self._arg_value(arg.value, scope, break_ctl)
            scope.let(arg.name, unescape_braces(value))
        for name, value in closure.provided.items():
            scope.set(name, unescape_braces(value))
        if not node.executors:
            scope.pipe = ""
        is_first = True
        for executor in node.executors:
            if break_ctl is not None and break_ctl.is_break:
                break
            if isinstance(executor, BreakNode):
                value, _ = await self._unnamed(executor, executor.unnamed, None, is_first, scope)
                if value is not None:
                    scope.pipe = value
                if break_ctl is not None:
                    break_ctl.is_break = True
                    break
                is_first = False
                continue
            await self._execute(executor, scope, is_first, break_ctl)
            is_first = False
            if self.aborted:
                return self.aborted_result()
        return ClosureResult(
            pipe=scope.pipe, is_break=break_ctl.is_break if break_ctl is not None else False
        )

    async def run_sub(
        self, command: Any, scope: Scope, flags: dict[int, bool] | None
    ) -> ClosureResult:
        """``executeSubCommands``: run a closure argument, or parse and run a quoted script
        (``/if … "/echo hi"``) in a scope below ``scope``."""
        if isinstance(command, ScriptClosure):
            return await self.run_closure(command)
        text = pipe_text(command)
        result = await self.run(text, scope=scope, flags=flags)
        return result if result is not None else ClosureResult(pipe="")

    # -- one command ------------------------------------------------------------------------

    def _tick(self, node: CommandNode) -> None:
        self.steps += 1
        if self.steps > self.budget.max_steps:
            raise self._budget_error(
                f"Script stopped after {self.budget.max_steps} commands",
                "steps",
                self.budget.max_steps,
                node,
            )
        if self._deadline is not None and self.monotonic() > self._deadline:
            raise self._budget_error(
                f"Script stopped after {self.budget.max_seconds:g} seconds",
                "seconds",
                self.budget.max_seconds,
                node,
            )

    def _budget_error(
        self, message: str, budget: str, limit: float, node: CommandNode
    ) -> ScriptBudgetExceeded:
        where = script_error(message, _source(node), node.start, parser=False)
        return ScriptBudgetExceeded(
            message,
            budget=budget,
            limit=limit,
            line=where.line,
            column=where.column,
            hint=where.hint,
        )

    async def _execute(
        self,
        node: CommandNode,
        scope: Scope,
        is_first: bool,
        break_ctl: BreakController | None,
    ) -> None:
        self._tick(node)
        command = self.registry.get("run" if node.name == ":" else node.name)
        if command is None:  # a command removed after parsing
            raise script_error(
                f'Unknown command at position {node.start}: "/{node.name}"',
                _source(node),
                node.start,
                parser=True,
            )
        try:
            args: dict[str, Any] = {}
            for arg in node.named:
                value = await self._arg_value(arg.value, scope, break_ctl)
                value = unescape_braces(value)
                spec = command.named(arg.name)
                if spec is not None and spec.accepts_multiple:
                    args.setdefault(arg.name, []).append(value)
                else:
                    args[arg.name] = value
            value, has_unnamed = await self._unnamed(
                node, node.unnamed, command, is_first, scope, break_ctl
            )
            if self.aborted:
                return
            call = CommandCall(
                runner=self,
                command=command,
                node=node,
                args=args,
                value=value,
                has_unnamed=has_unnamed,
                scope=scope,
                break_ctl=break_ctl,
            )
            result = command.function(call)
            if command.is_async:
                result = await result
        except (ScriptBudgetExceeded, RequestAborted, AccessError):
            raise  # a budget, a stop, or the caller's limits (a server's turn rate): not the
            # script's failure
        except RecursionError as exc:
            raise self._budget_error(
                "Script nesting too deep", "depth", self.budget.max_depth, node
            ) from exc
        except ScriptError as exc:
            raise script_error(exc.message, _source(node), node.start, parser=False) from exc
        except TavernKitError as exc:
            raise script_error(str(exc), _source(node), node.start, parser=False) from exc
        except Exception as exc:  # a command's bug: still SillyTavern's error shape
            message = str(exc) or type(exc).__name__
            raise script_error(message, _source(node), node.start, parser=False) from exc
        scope.pipe = _lint_pipe(result)

    async def _arg_value(
        self, value: str | ClosureNode | None, scope: Scope, break_ctl: BreakController | None
    ) -> Any:
        if isinstance(value, ClosureNode):
            closure = ScriptClosure(value, Scope(scope), break_ctl)
            if value.execute_now:
                return (await self.run_closure(closure)).pipe
            return closure
        if value is None:
            return None
        return await self.substitute(value, scope)

    async def _unnamed(
        self,
        node: CommandNode | BreakNode,
        unnamed: list[UnnamedArg],
        command: Command | None,
        is_first: bool,
        scope: Scope,
        break_ctl: BreakController | None = None,
    ) -> tuple[Any, bool]:
        if not unnamed:
            if not is_first and node.inject_pipe:
                pipe = scope.pipe
                return pipe, pipe is not None
            return None, False
        values = [await self._arg_value(u.value, scope, break_ctl) for u in unnamed]
        value: Any
        if command is not None and command.split:
            value = [unescape_braces(v) for v in values]
        elif len(values) == 1:
            value = unescape_braces(values[0])
        elif not any(isinstance(v, ScriptClosure) for v in values):
            value = unescape_braces("".join(pipe_text(v) for v in values))
        else:
            value = [unescape_braces(v) for v in values]
        return value, True

    # -- helpers for commands ---------------------------------------------------------------

    def random(self) -> float:
        """``Math.random()``: the injected generator, else Python's."""
        return self.rng() if self.rng is not None else _SYSTEM_RANDOM.random()

    async def generate(self, request: GenerationRequest) -> str:
        """Run a generation through the host. Its time does not count against the run's time
        budget (the model has timeouts of its own; the budget bounds the script)."""
        started = self.monotonic()
        try:
            return await self.host.generate(request)
        finally:
            if self._deadline is not None:
                self._deadline += max(0.0, self.monotonic() - started)

    async def ask(self, question: Question) -> Answer | None:
        """Put ``question`` to the user through the host (None: no one can be asked). The
        user's thinking time does not count against the run's time budget; the asker bounds
        it (the server's cancels an unanswered question)."""
        started = self.monotonic()
        try:
            return await self.host.ask(question)
        finally:
            if self._deadline is not None:
                self._deadline += max(0.0, self.monotonic() - started)

    async def sleep(self, seconds: float) -> None:
        """``/delay``: wait, but never past the run's deadline."""
        if self._deadline is not None:
            seconds = min(seconds, max(0.0, self._deadline - self.monotonic()))
        await self.sleeper(seconds)

    async def run_quick_reply(
        self,
        qr_set: QuickReplySet,
        reply: QuickReply,
        *,
        args: Mapping[str, Any] | None = None,
        mode: str = "run",
    ) -> Any:
        """Run a quick reply as ``/run`` (``mode="run"``) or its button / ``/qr N`` do
        (``"click"``): a slash message runs as a script in a fresh scope (``{{arg::name}}`` for
        the named arguments, ``''`` for others); other text goes to the input box and is sent
        unless the set has ``disableSend``. Returns the script's pipe, else ``''``."""
        if not reply.message:
            return ""
        scope = Scope()
        for key, value in (args or {}).items():
            if not key.startswith("_"):
                scope.set_macro(f"arg::{key}", value)
        scope.set_macro("arg::*", "")
        host = self.host
        typed = host.input_text
        text = click_text(qr_set, reply, typed) if mode == "click" else f"{reply.message} "
        if text.startswith("/") and not qr_set.disable_send:
            if mode == "run":
                result = await self.run(text, scope=scope, handle_parser_errors=True)
            else:
                result = await self.run_on_chat_input(text, scope=scope)
            return result.pipe if result is not None and result.pipe is not None else ""
        host.input_text = self.substitute_plain(text)
        if not qr_set.disable_send:
            await self.generate(GenerationRequest("send", prompt=host.input_text))
        return ""

    async def run_on_chat_input(self, text: str, *, scope: Scope | None = None) -> ClosureResult:
        """``executeSlashCommandsOnChatInput``: errors become toasts and an error result."""
        try:
            result = await self.run(text, scope=scope)
        except ScriptBudgetExceeded:
            raise
        except ScriptError as exc:
            if exc.name == "SlashCommandParserError":
                title = "SlashCommandParserError"
            else:
                title = "SlashCommandExecutionError"
            self.host.toast(
                Toast(
                    "error",
                    f"{exc.message} (line {exc.line}, column {exc.column})",
                    title,
                    {"escapeHtml": False, "timeOut": 10000},
                )
            )
            return ClosureResult(is_error=True, error_message=exc.message)
        return result if result is not None else ClosureResult()

    # -- macros -----------------------------------------------------------------------------

    def substitute_plain(self, text: str) -> str:
        """``substituteParams``: the chat's macros only (no pipe, no scoped variables)."""
        if "{{" not in text:
            return str(unescape_braces(text))
        return render_macros(text, self._env(), compat="st-1.18").text

    async def substitute(self, text: str, scope: Scope) -> str:
        """Macro substitution of one argument, with the script's own macros."""
        if "{{" not in text:
            return text
        env = self._env()
        return render_macros(text, env, compat="st-1.18", overlay=_ScopeMacros(scope)).text

    def _env(self) -> MacroEnv:
        env = self.host.macro_env()
        if self.rng is not None:
            env.rng = _Random(self.rng)
            # {{random}} does not draw from Math.random in SillyTavern
            env.random_macro_rng = _SYSTEM_RANDOM
        return env


def _source(node: CommandNode) -> str:
    return node.source


def _lint_pipe(value: Any) -> Any:
    if value is None or value is UNSET:
        return ""
    if isinstance(value, str | ScriptClosure):
        return value
    return js_json_stringify(value) if isinstance(value, list | dict) else js_string(value)


class _ScopeMacros:
    """``{{pipe}}``, ``{{var::name::index}}`` and the scope's macros for one substitution."""

    __slots__ = ("scope",)

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def _keys(self, key: str) -> list[tuple[str, Any]]:
        found = [(k, v) for k, v in self.scope.macro_items() if k.split("::", 1)[0].lower() == key]
        # exact keys before wildcards, as SillyTavern sorts them
        return sorted(found, key=lambda item: "*" in item[0])

    def handles(self, key: str) -> bool:
        return key in ("pipe", "var") or bool(self._keys(key))

    def function(self, key: str, argc: int) -> Callable[[list[str]], object] | None:
        if key == "pipe" and argc == 0:
            return lambda _args: pipe_text(self.scope.pipe)
        if key == "var" and argc in (1, 2):
            return self._var
        candidates = [(k, v) for k, v in self._keys(key) if k.count("::") == argc]
        if not candidates:
            return None

        def call(args: list[str]) -> object:
            for name, value in candidates:
                parts = name.split("::")[1:]
                if all(_part_matches(p, a) for p, a in zip(parts, args, strict=True)):
                    # SillyTavern's scope macros print a falsy value (timesIndex 0) as ''
                    return pipe_text(value) if value or value is False else ""
            raise MacroRuntimeError("no such scope macro")

        return call

    def _var(self, args: list[str]) -> object:
        name = args[0]
        if not self.scope.exists(name):
            return ""
        value = self.scope.get(name, args[1] if len(args) > 1 else None)
        if isinstance(value, ScriptClosure):
            return "[Closure]"
        return pipe_text(value)


def _part_matches(pattern: str, value: str) -> bool:
    if "*" not in pattern:
        return pattern == value
    regex = ".*".join(re.escape(p) for p in pattern.split("*"))
    return re.fullmatch(regex, value, re.S) is not None and "::" not in value
