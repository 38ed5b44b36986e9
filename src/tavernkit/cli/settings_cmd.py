"""``tavernkit settings …``: world info, prompt and reasoning settings and the compatibility
mode, as the server's ``/settings`` routes change them (:mod:`tavernkit.assist.settings_edit`).

``settings set world_info.depth=4 reasoning.auto_parse=true compat=st-1.18`` sets those keys
only (values are JSON, or text when they are not); a key that does not exist or a value it
does not take is a one-line error, and nothing is stored then.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from tavernkit.assist.settings_edit import SETTINGS_SECTIONS, settings_view, update_settings
from tavernkit.cli._common import HomeOption, fail, parse_assignments, run_in_tavern
from tavernkit.facade import Tavern
from tavernkit.models.settings import Settings

__all__ = ["settings_app"]

out = Console(highlight=False, soft_wrap=True)

settings_app = typer.Typer(
    help="Settings: world info, prompt and reasoning, and the compatibility mode.",
    no_args_is_help=True,
)


def _print(settings: Settings, section: str | None) -> None:
    view = settings_view(settings)
    out.print_json(json.dumps(view if section is None else view[section]))


@settings_app.command("show")
def settings_show(
    section: Annotated[
        str | None, typer.Argument(help=f"One of {', '.join(SETTINGS_SECTIONS)}, or all.")
    ] = None,
    home: HomeOption = None,
) -> None:
    """The settings (a section's, or all of them)."""
    if section is not None and section not in SETTINGS_SECTIONS:
        raise fail(f"no settings section {section!r} (one of {', '.join(SETTINGS_SECTIONS)})")

    async def action(tk: Tavern) -> Settings:
        return await tk.settings()

    _print(run_in_tavern(home, action), section)


@settings_app.command("set")
def settings_set(
    assignments: Annotated[
        list[str], typer.Argument(help="section.key=value, e.g. world_info.depth=4.")
    ],
    home: HomeOption = None,
) -> None:
    """Set settings; the others keep their values."""
    changes = parse_assignments(assignments, example="world_info.depth=4", scalars=("compat",))

    async def action(tk: Tavern) -> Settings:
        return await update_settings(tk.runtime, changes)

    _print(run_in_tavern(home, action), None)
