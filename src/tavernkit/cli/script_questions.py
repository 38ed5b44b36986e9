"""A script's questions on the terminal (``tavernkit chat``): ``/input`` prints its text and
reads a line (Enter alone keeps ``default=``), ``/popup`` and ``/buttons`` list their buttons
by number, ``/echo awaitDismissal`` waits for Enter. End of input or Ctrl-C is SillyTavern's
Cancel (Escape)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.markup import escape

from tavernkit.cli.chat_display import out, say_error
from tavernkit.cli.language import say
from tavernkit.stscript import Answer, Question

__all__ = ["ask_on_terminal"]

#: reads one line after the prompt; None: end of input, or Ctrl-C
ReadLine = Callable[[str], Awaitable[str | None]]


async def ask_on_terminal(question: Question, read: ReadLine) -> Answer:
    """Put ``question`` on the terminal and read the answer with ``read``."""
    if question.title:
        out.print(f"[bold]{escape(question.title)}[/]")
    if question.text:
        out.print(question.text, markup=False, highlight=False, soft_wrap=True)
    match question.kind:
        case "input":
            return await _input(question, read)
        case "popup":
            return await _popup(question, read)
        case "buttons":
            return await _buttons(question, read)
        case _:
            await read(say("(Enter goes on) "))
            return Answer("ok")


async def _input(question: Question, read: ReadLine) -> Answer:
    if question.default:
        out.print(f"[dim]{escape(say('Enter keeps: {default}', default=question.default))}[/]")
    line = await read("? ")
    if line is None:
        return Answer("cancel")
    return Answer("ok", line or question.default)


async def _popup(question: Question, read: ReadLine) -> Answer:
    ok = question.ok_button or say("OK")
    buttons = [ok] + ([question.cancel_button] if question.cancel_button else [])
    _list(buttons)
    chosen = await _choose(len(buttons), say("choose a number (Enter: {label}): ", label=ok), read)
    if chosen is None:
        return Answer(None)
    index = chosen[0] if chosen else 0
    return Answer("ok" if index == 0 else "cancel")


async def _buttons(question: Question, read: ReadLine) -> Answer:
    _list(list(question.labels))
    prompt = (
        say("choose numbers separated by spaces (Enter: none): ")
        if question.multiple
        else say("choose a number (Enter cancels): ")
    )
    chosen = await _choose(len(question.labels), prompt, read, multiple=question.multiple)
    if chosen is None or (not chosen and not question.multiple):
        return Answer(None)
    return Answer("ok", chosen=tuple(chosen))


def _list(labels: list[str]) -> None:
    for number, label in enumerate(labels, 1):
        out.print(f"  {number}. {escape(label)}", highlight=False)


async def _choose(
    count: int, prompt: str, read: ReadLine, *, multiple: bool = False
) -> list[int] | None:
    """The 0-based choices typed (an empty line: none); None at end of input. A number out
    of range is said and asked again."""
    while True:
        line = await read(prompt)
        if line is None:
            return None
        words = line.replace(",", " ").split()
        if not multiple:
            words = words[:1]
        bad = next((w for w in words if not w.isdigit() or not 1 <= int(w) <= count), None)
        if bad is None:
            return sorted({int(w) - 1 for w in words})
        say_error(say("no choice {value}: a number from 1 to {count}", value=bad, count=count))
