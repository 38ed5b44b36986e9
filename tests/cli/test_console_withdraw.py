"""The terminal shows a reply as it arrives and takes back a withdrawn tail; output that
cannot be taken back (a pipe) holds the unfinished clause instead; ``--json`` names it."""

from __future__ import annotations

import json
from io import StringIO

from rich.console import Console

from tavernkit.cli.chat_display import ChatConsoleSink, JsonSink
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import ConsoleSink, WithdrawEvent
from tavernkit.providers.events import TextDelta


def terminal(width: int = 40) -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, width=width, force_terminal=True, color_system=None), out


async def test_a_terminal_shows_the_first_piece_at_once_and_erases_a_withdrawn_tail() -> None:
    console, out = terminal()
    sink = ConsoleSink(console)
    await sink.emit(TextDelta("The tide"))
    assert out.getvalue() == "The tide"  # mid-sentence, shown as it came
    await sink.emit(TextDelta(" turns. It ri"))
    await sink.emit(WithdrawEvent(" It ri"))
    # back to the column after "The tide turns." and the rest of the screen cleared
    assert out.getvalue().endswith("\r\x1b[15C\x1b[J")
    await sink.emit(TextDelta(" It rises."))
    await sink.finalize(TurnResult("completed", "The tide turns. It rises."))
    assert out.getvalue().endswith("\x1b[J It rises.\n")


async def test_a_withdrawal_goes_back_over_wrapped_rows_after_the_speakers_name() -> None:
    console, out = terminal(width=10)
    sink = ChatConsoleSink(console, header="Mira")  # "Mira: " takes 6 columns
    await sink.emit(TextDelta("Hi. One two three"))  # 6 + 17 = 23 cells: three rows
    await sink.emit(WithdrawEvent(" One two three"))
    # two rows up, to the column after "Mira: Hi."
    assert out.getvalue().endswith("\x1b[2A\r\x1b[9C\x1b[J")


async def test_a_pipe_holds_the_unfinished_clause_and_never_prints_a_withdrawn_one() -> None:
    out = StringIO()
    sink = ConsoleSink(Console(file=out, width=80, color_system=None))
    await sink.emit(TextDelta("The tide turns. It ri"))
    assert out.getvalue() == "The tide turns."
    await sink.emit(WithdrawEvent(" It ri"))
    await sink.emit(TextDelta(" It rises."))
    await sink.finalize(TurnResult("completed", "The tide turns. It rises."))
    assert out.getvalue() == "The tide turns. It rises.\n"


async def test_json_lines_name_a_withdrawal() -> None:
    out = StringIO()
    sink = JsonSink(Console(file=out, width=200, color_system=None))
    await sink.emit(TextDelta("It ri"))
    await sink.emit(WithdrawEvent("It ri"))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [
        {"event": "text", "text": "It ri"},
        {"event": "withdraw", "text": "It ri"},
    ]
