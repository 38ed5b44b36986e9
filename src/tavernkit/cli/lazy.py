"""Commands registered by name and imported when they run.

``tavernkit --help`` lists every command with its one-line help; importing every command's
module for that would import the whole engine (about a second). A :class:`LazyCommand` stands
in the group with its name and help only; when click parses its arguments, it imports the
module and hands over to the real command (``make_context`` returns the real command's
context, so click invokes the real one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["LazyCommand", "LazyGroup", "StandIn"]

#: a real command, as typer makes it (typer carries its own click: its public classes are
#: named here, never its private copy of click)
Command = TyperCommand | TyperGroup


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """Where a built-in command lives: ``module.attribute`` is a ``typer.Typer`` (a group of
    sub-commands) or a function (one command); ``help`` is its one-line help."""

    name: str
    module: str
    attribute: str
    help: str

    def load(self) -> Command:
        """The real click command (imports its module)."""
        target = getattr(import_module(self.module), self.attribute)
        command: object
        if isinstance(target, typer.Typer):
            # as when added with add_typer: a group even with one sub-command, no completion
            target._add_completion = False
            command = typer.main.get_group(target)
        else:
            single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            single.command(self.name)(target)
            command = typer.main.get_command(single)
        if not isinstance(command, TyperCommand | TyperGroup):  # pragma: no cover - typer's own
            raise TypeError(f"{self.module}.{self.attribute} is not a typer command")
        command.name = self.name
        return command


class StandIn(TyperCommand):
    """A command not imported yet: its name and help for listings; parsing loads it."""

    def __init__(self, spec: LazyCommand) -> None:
        super().__init__(spec.name, help=spec.help, short_help=spec.help, add_help_option=False)
        self.spec = spec
        self._real: Command | None = None

    def real(self) -> Command:
        if self._real is None:
            self._real = self.spec.load()
        return self._real

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Any = None,  # click's Context: typer names only its own subclass publicly
        **extra: Any,
    ) -> Any:
        return self.real().make_context(info_name, args, parent=parent, **extra)


class LazyGroup(TyperGroup):
    """The top-level group: typer's own commands (plugins') plus the stand-ins."""

    specs: tuple[LazyCommand, ...] = ()

    @classmethod
    def with_commands(cls, specs: Sequence[LazyCommand]) -> type[LazyGroup]:
        """This class with ``specs`` as its built-in commands."""
        return type(cls.__name__, (cls,), {"specs": tuple(specs)})

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for spec in self.specs:
            # a plugin's command of the same name, registered on the typer app, wins
            self.commands.setdefault(spec.name, StandIn(spec))

    def list_commands(self, ctx: Any) -> list[str]:
        # built-ins in their declared order, then any plugin commands
        order = [spec.name for spec in self.specs]
        return order + sorted(name for name in self.commands if name not in order)
