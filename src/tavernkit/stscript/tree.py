"""STscript's parse tree: commands, their named and unnamed arguments, closures and
``/break``, and where an error points (SillyTavern's line, column and excerpt).

The parser (:mod:`tavernkit.stscript.parser`) builds it; the executor walks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tavernkit.errors import ScriptError

__all__ = [
    "BreakNode",
    "ClosureNode",
    "CommandNode",
    "CommandShape",
    "NamedArg",
    "UnnamedArg",
    "error_hint",
    "script_error",
]


class CommandShape(Protocol):
    """What the parser needs to know of a command."""

    @property
    def name(self) -> str: ...
    @property
    def split(self) -> bool: ...
    @property
    def split_count(self) -> int | None: ...
    @property
    def raw_quotes(self) -> bool: ...
    @property
    def takes_unnamed(self) -> bool: ...


ArgValue = "str | ClosureNode"


@dataclass(slots=True)
class NamedArg:
    name: str
    value: str | ClosureNode | None
    start: int = 0
    end: int = 0


@dataclass(slots=True)
class UnnamedArg:
    value: str | ClosureNode
    start: int = 0
    end: int = 0


@dataclass(slots=True)
class CommandNode:
    """One command call. ``start`` is the index just after its ``/`` (SillyTavern's)."""

    name: str
    shape: CommandShape | None
    start: int
    named: list[NamedArg] = field(default_factory=list)
    unnamed: list[UnnamedArg] = field(default_factory=list)
    inject_pipe: bool = True
    flags: dict[int, bool] = field(default_factory=dict)
    end: int = 0
    source: str = ""


@dataclass(slots=True)
class BreakNode:
    start: int
    unnamed: list[UnnamedArg] = field(default_factory=list)
    inject_pipe: bool = True
    name: str = "break"
    source: str = ""


@dataclass(slots=True)
class ClosureNode:
    """A closure as parsed: its declared arguments and its commands.

    ``source`` is the whole script the closure was parsed from (for error positions);
    ``raw_text`` the closure's own text between the braces (``/closure-serialize``).
    """

    arguments: list[NamedArg] = field(default_factory=list)
    executors: list[CommandNode | BreakNode] = field(default_factory=list)
    raw_text: str = ""
    execute_now: bool = False
    source: str = ""
    is_root: bool = False

    def __str__(self) -> str:
        return "[Closure]"


def _line_col(text: str, index: int) -> tuple[int, int]:
    before = text[:index]
    line = before.count("\n")
    column = index - (before.rfind("\n") + 1)
    return line, column


def error_hint(text: str, index: int) -> str:
    """The excerpt SillyTavern shows with an error: up to three lines ending at the error's
    line, numbered, and a caret line under the error's column."""
    line, column = _line_col(text, index)
    lines = text.split("\n")
    first = max(0, line - 2)
    width = len(str(line))
    out = []
    for number in range(first, line + 1):
        shown = lines[number].replace("\t", "    ") if number < len(lines) else ""
        out.append(f"{str(number).rjust(width)}:  {shown}")
    # SillyTavern shifts the caret by every tab of the error's line (each shown as 4 spaces)
    tabs = lines[line].count("\t") * 3 if line < len(lines) else 0
    out.append(" " * (column + width + 2 + tabs) + "^^^^^")
    return "\n".join(out)


def script_error(message: str, text: str, index: int, *, parser: bool) -> ScriptError:
    line, column = _line_col(text, index)
    return ScriptError(
        message,
        name="SlashCommandParserError" if parser else "SlashCommandExecutionError",
        line=line,
        column=column,
        hint=error_hint(text, index),
    )
