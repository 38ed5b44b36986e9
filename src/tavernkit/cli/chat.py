"""``tavernkit chat``: talk to a character in the terminal (or once, for scripts).

With no configuration it uses the embedded model and the bundled demo character (Wren,
imported from the package data on first use), so the command works offline on a fresh install.
Every action is one :class:`~tavernkit.chat.service.ChatService` call; the session and its
slash commands are in :mod:`.chat_session`, the display in :mod:`.chat_display`.

``--review`` turns response review on for the chat (kept in its metadata, winning over the
profile's setting): ``inherited`` (the replying model reviews), ``PROFILE[:MODEL]`` (a pinned
reviewer), ``off``, or ``profile`` (clear the chat's own setting).

Options are checked before anything is written: an unknown ``--profile`` or ``--persona``
ends the command with one error line and the chat untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from tavernkit.chat.review_setup import check_reviewer, parse_review, set_chat_review
from tavernkit.chat.service import ChatService
from tavernkit.cli._common import gathered
from tavernkit.cli.chat_display import err, out
from tavernkit.cli.chat_session import Session
from tavernkit.cli.error_text import error_text
from tavernkit.cli.group_session import group_name_of_chat, open_group_chat
from tavernkit.cli.language import say
from tavernkit.demo import DEMO_CHARACTER, add_demo_character
from tavernkit.errors import FormatError, NotFound, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.models.profile import ReviewSettings

__all__ = ["DEMO_CHARACTER", "ChatOptions", "chat_command", "ensure_character", "open_chat"]


async def ensure_character(tk: Tavern, name: str | None) -> str:
    """The character to chat with: ``name``, else the selected one, else the demo card
    (imported from the package data the first time)."""
    settings = await tk.settings()
    wanted = name or settings.selections.character or DEMO_CHARACTER
    try:
        record = await tk.store.get_record("character", wanted, owner=tk.owner)
        return record.info.id
    except NotFound:
        if wanted != DEMO_CHARACTER:
            raise
    return (await add_demo_character(tk)).id


async def open_chat(
    chats: ChatService, character: str, *, chat: str | None, new: bool, persona: str | None
) -> tuple[str, bool]:
    """The chat id to use and whether it was just created."""
    if chat is not None:
        return (await chats.store.get_chat_info(chat, owner=chats.owner)).id, False
    if not new:
        latest = await chats.latest_chat(character)
        if latest is not None:
            return latest.id, False
    return (await chats.new_chat(character, persona=persona)).id, True


async def _interactive(session: Session, fresh: bool) -> None:
    stored = await session.chats.load(session.chat_id)
    who = f"group {session.group}" if session.group else stored.info.character_name
    who = who or "the character"
    out.print(
        "[dim]"
        + say(
            "chat {name} with {who}; /help for commands",
            name=escape(stored.info.name),
            who=escape(who),
        )
        + "[/]"
    )
    await session.history(20 if not fresh else 1)
    # what the first reply would load (the tokenizer, the embedded model) loads while the
    # first message is typed: the input thread waits in input(), which needs no GIL
    warming = asyncio.create_task(session.tk.warm_up(session.overrides.get("profile") or ""))
    session.watch_typing = True
    session.can_ask = True
    try:
        with session.sigint_handler():
            while True:
                line = await session.input.read("> ", session.interrupted)
                if line is None:
                    out.print()
                    return
                line = line.strip()
                if line and not await session.command(line):
                    return
    finally:
        warming.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await warming


@dataclass(frozen=True)
class ChatOptions:
    """``tavernkit chat``'s argument and options (``--help`` lists them)."""

    character: Annotated[
        str | None, typer.Argument(help="Name or id of a character (default: the demo, Wren).")
    ] = None
    profile: Annotated[
        str | None, typer.Option("--profile", "-p", help="Connection profile to use.")
    ] = None
    persona: Annotated[str | None, typer.Option("--persona", help="Persona to speak as.")] = None
    chat: Annotated[str | None, typer.Option("--chat", help="Chat id or name to resume.")] = None
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            help="Chat with a stored group (its open chat; --new: a new one); "
            "/trigger NAME asks one member.",
        ),
    ] = None
    new: Annotated[bool, typer.Option("--new", help="Start a new chat.")] = False
    once: Annotated[
        str | None,
        typer.Option(
            "--once",
            help="Send one message to the character's latest chat (--new: a new one), "
            "print the reply, exit.",
        ),
    ] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False
    review: Annotated[
        str | None,
        typer.Option(
            "--review",
            help="Review this chat's replies before they show (kept for the chat): "
            "inherited, off, PROFILE, PROFILE:MODEL, or profile (the profile's setting).",
        ),
    ] = None
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
    ] = None


@gathered(ChatOptions)
def chat_command(options: ChatOptions) -> None:
    """Chat with a character (the embedded model and the demo character by default)."""
    o = options
    if o.chat is not None and o.new:
        err.print(f"[bold red]{say('error:')}[/] {say('--chat and --new cannot be used together')}")
        raise typer.Exit(2)
    if o.group is not None and o.character is not None:
        err.print(f"[bold red]{say('error:')}[/] {say('name a character or --group, not both')}")
        raise typer.Exit(2)
    try:
        review_setting = parse_review(o.review) if o.review not in (None, "profile") else None
    except FormatError as exc:
        err.print(f"[bold red]{say('error:')}[/] {escape(exc.reason)}")
        raise typer.Exit(2) from None
    _run_chat(lambda: _chat_main(o, review_setting))


async def _chat_main(o: ChatOptions, review_setting: ReviewSettings | None) -> int:
    """Open the chat the options name and run the session (or the one ``--once`` turn);
    the exit code."""
    overrides = {k: v for k, v in (("profile", o.profile), ("persona", o.persona)) if v}
    async with Tavern(o.home) as tk:
        # Checked first: a mistyped name must not create a chat or store a message.
        await tk.chats.check_overrides(overrides or None)
        await check_reviewer(tk.store, review_setting, owner=tk.owner)
        chat_id, fresh, group_name = await _open(tk, o)
        if o.review is not None:
            await set_chat_review(tk.store, chat_id, review_setting, owner=tk.owner)
        session = Session(tk, chat_id, as_json=o.as_json, overrides=overrides, group=group_name)
        if o.once is not None and group_name is not None:
            turn = await session.group_turn("normal", text=o.once)
            return 0 if turn.status == "completed" else 1
        if o.once is not None:
            outcome = await session.run_turn(tk.chats.send, o.once)
            return 0 if outcome.status == "completed" else 1
        await _interactive(session, fresh)
        return 0


async def _open(tk: Tavern, o: ChatOptions) -> tuple[str, bool, str | None]:
    """The chat the options name (its id, whether it is new) and its group's name, if any."""
    group_name = o.group
    if group_name is not None:
        chat_id, fresh = await open_group_chat(tk.chats, group_name, chat=o.chat, new=o.new)
        return chat_id, fresh, group_name
    char_id = await ensure_character(tk, o.character) if o.chat is None else ""
    chat_id, fresh = await open_chat(tk.chats, char_id, chat=o.chat, new=o.new, persona=o.persona)
    if o.chat is not None:  # a group's chat resumed by name is a group session
        group_name = await group_name_of_chat(tk.chats, chat_id)
    return chat_id, fresh, group_name


def _run_chat(main: Callable[[], Coroutine[Any, Any, int]]) -> None:
    """Run the command's coroutine; a library error is one red line and exit code 1."""
    try:
        code = asyncio.run(main())
    except TavernKitError as exc:
        err.print(f"[bold red]{say('error:')}[/] {escape(error_text(exc))}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:  # Ctrl-C where no handler could be set (not the main thread)
        out.print()
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)
