"""Commands: each one a small registered function with its argument spec.

A :class:`Command` says how the parser reads its unnamed argument (one trimmed string, split
into words, raw quotes) and what named arguments it takes (for help texts and typing; values
arrive as strings, closures or lists and the function converts them as SillyTavern does). A
:class:`CommandRegistry` maps names and aliases to commands; :func:`default_registry` has every
built-in, and plugins add theirs through the ``register_script_commands`` hook (see
:func:`tavernkit.plugins.script_commands.plugin_script_commands`) or
:meth:`CommandRegistry.register`.

A command function gets one :class:`CommandCall` and returns the new pipe (a string, a closure,
or any JSON value, which becomes its JSON text; ``None`` becomes ``''``). It raises
:class:`~tavernkit.stscript.scope.ScriptError` (or any exception) with SillyTavern's message
to fail the script; the executor adds the position.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import Any, Literal, TypedDict, Unpack

from tavernkit.errors import PluginError

__all__ = [
    "ArgType",
    "Command",
    "CommandFunction",
    "CommandOptions",
    "CommandRegistry",
    "NamedArgSpec",
]

ArgType = Literal["string", "number", "bool", "closure", "list", "variable", "subcommand", "any"]
#: takes a :class:`tavernkit.stscript.executor.CommandCall`, returns the pipe (or awaits it)
CommandFunction = Callable[[Any], Any | Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class NamedArgSpec:
    """One named argument: its name, types, default and allowed values (for help)."""

    name: str
    types: tuple[ArgType, ...] = ("string",)
    default: str | None = None
    enum: tuple[str, ...] = ()
    description: str = ""
    accepts_multiple: bool = False


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command as the parser and the executor see it."""

    name: str
    function: CommandFunction
    aliases: tuple[str, ...] = ()
    named_args: tuple[NamedArgSpec, ...] = ()
    #: the unnamed argument's types; empty: the command takes none (then it is never split)
    unnamed_types: tuple[ArgType, ...] = ("string",)
    split: bool = False
    split_count: int | None = None
    raw_quotes: bool = False
    help: str = ""
    is_async: bool = field(default=False, compare=False)

    @property
    def takes_unnamed(self) -> bool:
        return bool(self.unnamed_types)

    def named(self, name: str) -> NamedArgSpec | None:
        return next((a for a in self.named_args if a.name == name), None)


class CommandOptions(TypedDict, total=False):
    """:meth:`CommandRegistry.register`'s keyword options: :class:`Command`'s fields of the
    same names, and ``replace`` (a name already registered is replaced rather than an
    error)."""

    aliases: Sequence[str]
    named_args: Sequence[NamedArgSpec | str]
    unnamed_types: Sequence[ArgType]
    split: bool
    split_count: int | None
    raw_quotes: bool
    help: str
    replace: bool


class CommandRegistry:
    """Commands by name and alias (SillyTavern's names are case-sensitive)."""

    def __init__(self, commands: Iterable[Command] = ()) -> None:
        self._by_name: dict[str, Command] = {}
        self._commands: dict[str, Command] = {}
        for command in commands:
            self.add(command)

    def add(self, command: Command, *, replace: bool = False) -> Command:
        if not replace:
            for name in (command.name, *command.aliases):
                if name in self._by_name:
                    raise PluginError(f"slash command /{name} is registered twice")
        is_async = inspect.iscoroutinefunction(command.function)
        if is_async != command.is_async:
            command = _with_async(command, is_async)
        self._commands[command.name] = command
        for name in (command.name, *command.aliases):
            self._by_name[name] = command
        return command

    def register(
        self,
        name: str,
        function: CommandFunction,
        **options: Unpack[CommandOptions],
    ) -> Command:
        """Add a command (its options: :class:`CommandOptions`); ``named_args`` are specs or
        plain names (string arguments)."""
        unknown = sorted(set(options) - set(CommandOptions.__annotations__))
        if unknown:
            raise TypeError(f"register() got an unexpected keyword argument {unknown[0]!r}")
        if not name or any(c.isspace() or c in "|/" for c in name):
            raise PluginError(f"invalid slash command name {name!r}")
        o = options
        specs = tuple(
            a if isinstance(a, NamedArgSpec) else NamedArgSpec(a) for a in o.get("named_args", ())
        )
        return self.add(
            Command(
                name=name,
                function=function,
                aliases=tuple(o.get("aliases", ())),
                named_args=specs,
                unnamed_types=tuple(o.get("unnamed_types", ("string",))),
                split=o.get("split", False),
                split_count=o.get("split_count"),
                raw_quotes=o.get("raw_quotes", False),
                help=o.get("help", ""),
            ),
            replace=o.get("replace", False),
        )

    def get(self, name: str) -> Command | None:
        return self._by_name.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def commands(self) -> list[Command]:
        return list(self._commands.values())

    def copy(self) -> CommandRegistry:
        registry = CommandRegistry()
        registry._by_name = dict(self._by_name)
        registry._commands = dict(self._commands)
        return registry


def _with_async(command: Command, is_async: bool) -> Command:
    return _replace(command, is_async=is_async)
