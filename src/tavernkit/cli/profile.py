"""``tavernkit profile add|list|remove|fallback|review|test``: connection profiles.

A profile may hold a pool of keys: ``--key`` repeats, each ``env:NAME`` (an environment
variable, read at each request and never stored), ``prompt`` (asked for, hidden: nothing lands
in the shell history) or the key itself. Typed keys go to the store's key table (sealed
with the secret key, see :mod:`tavernkit.store.secret_key`), apart from the profile, which
keeps only their ids. ``fallback NAME add|remove OTHER[:MODEL]`` and ``fallback NAME list`` edit the
profile's fallback chain; ``fallback NAME randomize|ordered`` turns its randomizer on or off
(brief 003). ``add --review`` and ``review NAME inherited|off|PROFILE[:MODEL]|clear`` set
response review of the profile's chat turns; ``add --preset`` binds the profile's own
chat-completion preset. No command prints a key: ``list`` shows the pool's size, its key
labels and fingerprints, and the chain. Everything here goes through
:class:`tavernkit.profile_admin.ProfileAdmin` (``Tavern.profiles``), the Python API.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.chat.prepare import resolve_for_state
from tavernkit.chat.review_setup import parse_review
from tavernkit.cli._common import HomeOption, gathered, run_in_tavern
from tavernkit.cli.failures import task_failure_line, where_for
from tavernkit.cli.language import say
from tavernkit.errors import FormatError, GenerateTaskError
from tavernkit.facade import Tavern
from tavernkit.generation.one_request import send_one
from tavernkit.models.profile import (
    ApiFamily,
    ConnectionProfile,
    CredentialRef,
    FallbackChain,
    ProfileTimeouts,
    ReviewSettings,
)
from tavernkit.models.state import ChatState
from tavernkit.profile_admin import ProfileSummary, parse_fallback, parse_key
from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling, TextPrompt

__all__ = ["profile_app"]

T = TypeVar("T")
KIND = "connection_profile"
profile_app = typer.Typer(
    help="Connection profiles (where replies come from).", no_args_is_help=True
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

_APIS = ("chat", "text", "kobold", "novel", "local")


def _usage(message: str) -> typer.Exit:
    err.print(f"[bold red]{say('error:')}[/] {escape(message)}")
    return typer.Exit(2)


def _keys(values: list[str], key_env: list[str]) -> list[str | CredentialRef]:
    """The pool ``--key``/``--key-env`` describe, checked (and prompted for) before any write."""
    specs: list[str | CredentialRef] = []
    try:
        for value in values:
            if value in ("prompt", "-"):
                specs.append(parse_key(typer.prompt("API key", hide_input=True)))
            else:
                specs.append(parse_key(value))
        specs += [parse_key(f"env:{name}") for name in key_env]
    except FormatError as exc:
        raise _usage(exc.reason) from None
    return specs


@dataclass(frozen=True)
class ProfileAddOptions:
    """``tavernkit profile add``'s argument and options (``--help`` lists them)."""

    name: Annotated[str, typer.Argument(help="Profile name.")]
    api: Annotated[str, typer.Option("--api", help="chat, text, kobold, novel or local.")] = "chat"
    source: Annotated[
        str, typer.Option("--source", help="openai, claude, openrouter, custom...")
    ] = "openai"
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint URL.")] = None
    model: Annotated[str | None, typer.Option("--model", "-m")] = None
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            help="A key of the pool (repeat for several): env:NAME, 'prompt' (asked, hidden) "
            "or the key itself.",
        ),
    ] = None
    key_env: Annotated[
        list[str] | None,
        typer.Option("--key-env", help="A key read from this environment variable (repeats)."),
    ] = None
    connect_timeout: Annotated[
        float | None, typer.Option("--connect-timeout", help="Seconds to connect (10).")
    ] = None
    first_byte_timeout: Annotated[
        float | None,
        typer.Option("--first-byte-timeout", help="Seconds to the first data (120)."),
    ] = None
    idle_timeout: Annotated[
        float | None,
        typer.Option("--idle-timeout", help="Seconds between two data events (60)."),
    ] = None
    preset: Annotated[str | None, typer.Option("--preset", help="Bound chat preset.")] = None
    review: Annotated[
        str | None,
        typer.Option(
            "--review",
            help="Review replies before they show: inherited, off, PROFILE or PROFILE:MODEL.",
        ),
    ] = None
    default: Annotated[bool, typer.Option("--default", help="Make it the active profile.")] = False
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a profile of that name.")
    ] = False
    home: HomeOption = None


@profile_app.command("add")
@gathered(ProfileAddOptions)
def add(options: ProfileAddOptions) -> None:
    """Add a connection profile."""
    o = options
    if o.api not in _APIS:
        raise _usage("--api must be chat, text, kobold, novel or local")
    for flag, value in (
        ("--connect-timeout", o.connect_timeout),
        ("--first-byte-timeout", o.first_byte_timeout),
        ("--idle-timeout", o.idle_timeout),
    ):
        if value is not None and not value > 0:
            raise _usage(f"{flag} must be a positive number of seconds")
    timeouts = ProfileTimeouts(
        connect=o.connect_timeout, first_byte=o.first_byte_timeout, idle=o.idle_timeout
    )
    specs = _keys(o.key or [], o.key_env or [])
    settings = _review(o.review) if o.review is not None else None

    async def action(tk: Tavern) -> ConnectionProfile:
        return await tk.profiles.add(
            o.name,
            api=cast(ApiFamily, o.api),
            source=o.source,
            base_url=o.base_url,
            model=o.model,
            keys=specs,
            preset=o.preset,
            timeouts=timeouts,
            review=settings,
            replace=o.replace,
            activate=o.default,
        )

    profile = run_in_tavern(o.home, action)
    pool = f", {len(profile.credentials)} keys" if len(profile.credentials) > 1 else ""
    out.print(f"added profile [bold]{escape(o.name)}[/]{pool}" + (" (active)" if o.default else ""))


def _review(value: str) -> ReviewSettings:
    try:
        return parse_review(value)
    except FormatError as exc:
        raise _usage(exc.reason) from None


def review_label(review: ReviewSettings | None) -> str:
    """How ``list`` shows a review setting."""
    if review is None:
        return "none"
    if not review.enabled:
        return "off"
    if not review.reviewer_profile:
        return "inherited"
    pinned = review.reviewer_profile
    return f"{pinned}:{review.reviewer_model}" if review.reviewer_model else pinned


@profile_app.command("review")
def review_command(
    name: Annotated[str, typer.Argument(help="The profile whose turns are reviewed.")],
    setting: Annotated[
        str, typer.Argument(help="inherited, off, PROFILE, PROFILE:MODEL, or clear.")
    ],
    home: HomeOption = None,
) -> None:
    """Turn response review of a profile's chat turns on (inherited or pinned reviewer) or off."""
    settings = None if setting == "clear" else _review(setting)

    async def action(tk: Tavern) -> ConnectionProfile:
        return await tk.profiles.set_review(name, settings)

    profile = run_in_tavern(home, action)
    out.print(f"review of [bold]{escape(name)}[/]: {escape(review_label(profile.review))}")


def _timeouts(summary: ProfileSummary) -> str:
    t = summary.timeouts
    parts = [
        f"{label} {value:g}s"
        for label, value in (("connect", t.connect), ("first byte", t.first_byte), ("idle", t.idle))
        if value is not None
    ]
    return ", ".join(parts) or "-"


@profile_app.command("list")
def list_(home: HomeOption = None) -> None:
    """List profiles with their key pools and fallback chains (never a key)."""

    async def action(tk: Tavern) -> list[ProfileSummary]:
        return await tk.profiles.summaries()

    summaries = run_in_tavern(home, action)
    if not summaries:
        out.print("[dim]no profiles; the embedded model is used[/]")
        return
    # one block per profile, not a table: key lists and chains are too wide for 80 columns
    for p in summaries:
        where = ", ".join(x for x in (p.api, p.source, p.model, p.base_url) if x)
        out.print(f"[bold]{escape(p.name)}[/]{' *' if p.active else ''}  {escape(where)}")
        keys = ", ".join(p.keys) if p.keys else "none"
        out.print(f"  keys ({p.pool_size}): {escape(keys)}")
        randomized = " (randomized)" if p.randomize else ""
        out.print(f"  fallbacks: {escape(' → '.join(p.fallbacks) or 'none')}{randomized}")
        if p.preset:
            out.print(f"  preset: {escape(p.preset)}")
        if p.review is not None:
            out.print(f"  review: {escape(review_label(p.review))}")
        if _timeouts(p) != "-":
            out.print(f"  timeouts: {escape(_timeouts(p))}")


@profile_app.command("remove")
def remove(name: Annotated[str, typer.Argument()], home: HomeOption = None) -> None:
    """Remove a profile and the keys stored for it."""

    async def action(tk: Tavern) -> None:
        await tk.profiles.remove(name)

    run_in_tavern(home, action)
    out.print(f"removed profile [bold]{escape(name)}[/]")


@profile_app.command("fallback")
def fallback(
    name: Annotated[str, typer.Argument(help="The profile whose chain this edits.")],
    action: Annotated[
        str, typer.Argument(help="add, remove, list, randomize (on) or ordered (off).")
    ],
    target: Annotated[
        str | None, typer.Argument(help="OTHER or OTHER:MODEL (for add and remove).")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Edit a profile's fallback chain: the profiles (and models) tried when it fails."""
    if action not in ("add", "remove", "list", "randomize", "ordered"):
        raise _usage("the action is add, remove, list, randomize or ordered")
    if action in ("list", "randomize", "ordered") and target is not None:
        raise _usage(f"{action} takes no OTHER[:MODEL]")
    if action in ("randomize", "ordered"):

        async def toggle(tk: Tavern) -> FallbackChain:
            return await tk.profiles.set_randomize(name, action == "randomize")

        run_in_tavern(home, toggle)
        state = "randomized (one member leads each turn)" if action == "randomize" else "ordered"
        out.print(f"{escape(name)}'s fallback chain is {state}")
        return
    other: str | None = None
    model: str | None = None
    if action != "list":
        if target is None:
            raise _usage(f"{action} needs OTHER or OTHER:MODEL")
        try:
            other, model = parse_fallback(target)
        except FormatError as exc:
            raise _usage(exc.reason) from None

    async def run(tk: Tavern) -> list[Any]:
        if action == "list":
            return await tk.profiles.fallbacks(name)
        assert other is not None
        if action == "add":
            return await tk.profiles.add_fallback(name, other, model=model)
        return await tk.profiles.remove_fallback(name, other, model=model)

    entries = run_in_tavern(home, run)
    if not entries:
        out.print(f"[dim]{escape(name)} has no fallbacks[/]")
        return
    for n, entry in enumerate(entries, start=1):
        label = f"{entry.profile}:{entry.model}" if entry.model else entry.profile
        out.print(f"{n}. {escape(label)}")


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
