"""``tavernkit profile add|list|remove|test``: connection profiles.

Keys are read from a hidden prompt (``--key``) or named by environment variable
(``--key-env``); a typed key goes to the store's key table, apart from the profile, which keeps
only its id. No command prints a key, and ``list`` shows key labels and fingerprints only.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.chat.prepare import resolve_for_state
from tavernkit.cli._common import HomeOption, run_in_tavern
from tavernkit.cli.failures import task_failure_line, where_for
from tavernkit.errors import GenerateTaskError, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.generation.one_attempt import send_one
from tavernkit.models.profile import ConnectionProfile, CredentialRef
from tavernkit.models.state import ChatState
from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling, TextPrompt

__all__ = ["profile_app"]

T = TypeVar("T")
KIND = "connection_profile"
profile_app = typer.Typer(
    help="Connection profiles (where replies come from).", no_args_is_help=True
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@profile_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Profile name.")],
    api: Annotated[str, typer.Option("--api", help="chat, text, kobold, novel or local.")] = "chat",
    source: Annotated[
        str, typer.Option("--source", help="openai, claude, openrouter, custom...")
    ] = "openai",
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint URL.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m")] = None,
    key: Annotated[bool, typer.Option("--key", help="Prompt for an API key (hidden).")] = False,
    key_env: Annotated[
        str | None, typer.Option("--key-env", help="Read the key from this environment variable.")
    ] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Bound chat preset.")] = None,
    default: Annotated[bool, typer.Option("--default", help="Make it the active profile.")] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a profile of that name.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Add a connection profile."""
    if api not in ("chat", "text", "kobold", "novel", "local"):
        err.print("[bold red]error:[/] --api must be chat, text, kobold, novel or local")
        raise typer.Exit(2)
    secret = typer.prompt("API key", hide_input=True) if key else None

    async def action(tk: Tavern) -> None:
        existing = None
        try:
            existing = await tk.store.get_record(KIND, name, owner=tk.owner)
        except TavernKitError:
            existing = None
        if existing is not None and not replace:
            raise TavernKitError(f"a profile named {name!r} exists; use --replace")
        credentials: list[CredentialRef] = []
        if secret:
            key_id = await tk.store.add_api_key(source, secret, owner=tk.owner, label=name)
            credentials.append(CredentialRef(key_id=key_id, label=name))
        if key_env:
            credentials.append(CredentialRef(env=key_env))
        profile = ConnectionProfile(
            name=name,
            api=api,
            source=source,
            base_url=base_url,
            model=model,
            credentials=credentials,
            chat_preset=preset,
        )
        await tk.store.put(KIND, profile, owner=tk.owner, id=existing.info.id if existing else None)
        if default:
            settings = await tk.settings()
            settings.selections.profile = name
            await tk.store.put_settings(settings, owner=tk.owner)

    run_in_tavern(home, action)
    out.print(f"added profile [bold]{escape(name)}[/]" + (" (active)" if default else ""))


@profile_app.command("list")
def list_(home: HomeOption = None) -> None:
    """List profiles (never their keys)."""

    async def action(tk: Tavern) -> tuple[list[ConnectionProfile], str | None, dict[str, str]]:
        profiles = await tk.context().connection_profiles.list()
        keys = {
            k.id: f"{k.label or k.provider} ({k.fingerprint})"
            for k in await tk.store.list_api_keys(owner=tk.owner)
        }
        return profiles, (await tk.settings()).selections.profile, keys

    profiles, active, keys = run_in_tavern(home, action)
    if not profiles:
        out.print("[dim]no profiles; the embedded model is used[/]")
        return
    table = Table(show_header=True)
    for column in ("name", "api", "source", "model", "base url", "keys"):
        table.add_column(column)
    for p in profiles:
        creds = ", ".join(
            keys.get(c.key_id, "stored key") if c.key_id else f"${c.env}" for c in p.credentials
        )
        mark = " *" if p.name == active else ""
        table.add_row(
            escape(p.name + mark),
            p.api,
            escape(p.source),
            escape(p.model or "-"),
            escape(p.base_url or "-"),
            escape(creds or "-"),
        )
    out.print(table)


@profile_app.command("remove")
def remove(name: Annotated[str, typer.Argument()], home: HomeOption = None) -> None:
    """Remove a profile and the keys stored for it."""

    async def action(tk: Tavern) -> None:
        profile = await tk.store.get(KIND, name, owner=tk.owner)
        if isinstance(profile, ConnectionProfile):
            for ref in profile.credentials:
                if ref.key_id:
                    await tk.store.delete_api_key(ref.key_id, owner=tk.owner)
        await tk.store.delete(KIND, name, owner=tk.owner)
        settings = await tk.settings()
        if settings.selections.profile == name:
            settings.selections.profile = None
            await tk.store.put_settings(settings, owner=tk.owner)

    run_in_tavern(home, action)
    out.print(f"removed profile [bold]{escape(name)}[/]")


@profile_app.command("test")
def test(
    name: Annotated[str | None, typer.Argument(help="Profile (default: the active one).")] = None,
    home: HomeOption = None,
) -> None:
    """Send a one-line request through a profile and report the outcome."""

    async def action(tk: Tavern) -> tuple[str, float, str] | str:
        profile: Any = None
        if name:
            profile = await tk.store.get(KIND, name, owner=tk.owner)
        else:
            selected = (await tk.settings()).selections.profile
            profile = await tk.store.get(KIND, selected, owner=tk.owner) if selected else None
        profile = profile if isinstance(profile, ConnectionProfile) else None
        state = ChatState(profile=profile)
        connection = await resolve_for_state(tk.store, state, owner=tk.owner)
        sampling = Sampling(max_tokens=8)
        request: ChatPrompt | TextPrompt
        if connection.family == "chat":
            request = ChatPrompt(
                (ChatMessage("user", "Reply with the word OK."),), sampling=sampling
            )
        else:
            request = TextPrompt("Reply with the word OK.\n", sampling=sampling)
        started = time.monotonic()
        try:
            completion = await send_one(connection, request, stream=False)
        except GenerateTaskError as exc:
            where = await where_for(tk.store, profile, None, owner=tk.owner)
            return task_failure_line(exc, where)
        return connection.model or "-", time.monotonic() - started, completion.text.strip()

    outcome = run_in_tavern(home, action)
    if isinstance(outcome, str):
        err.print(f"failed: {outcome}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    model, seconds, text = outcome
    out.print(f"ok: {escape(model)} answered in {seconds:.2f}s: {escape(text[:80])}")
