"""The slash commands of ``tavernkit chat``: their syntax, and the argument checks that turn
bad input into a usage line instead of a traceback.

Every command is one :class:`SlashCommand` in :data:`COMMANDS`; ``/help`` prints the table.
Handlers parse their argument with the helpers here, which raise :class:`UsageError` (the
session prints ``usage: …`` on stderr and goes on).
"""

from __future__ import annotations

from dataclasses import dataclass

from tavernkit.errors import UsageError as UsageError

__all__ = [
    "COMMANDS",
    "SlashCommand",
    "UsageError",
    "help_text",
    "message_number",
    "no_argument",
    "positive_number",
    "split_command",
]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    summary: str
    aliases: tuple[str, ...] = ()

    def error(self, problem: str) -> UsageError:
        return UsageError(self, problem)


_TABLE = (
    SlashCommand("swipe", "/swipe [N|back]", "new alternative; N shows swipe N, back the previous"),
    SlashCommand("regen", "/regen", "replace the last reply (/undo brings it back)"),
    SlashCommand("continue", "/continue", "extend the last reply"),
    SlashCommand("impersonate", "/impersonate", "write your next message for you"),
    SlashCommand("send", "/send", "send the impersonated message"),
    SlashCommand("trigger", "/trigger NAME", "group chats: member NAME replies now (muted too)"),
    SlashCommand("prefill", "/prefill [TEXT]", "start the next reply with TEXT (none: off)"),
    SlashCommand("stop", "/stop", "stop the reply being generated (Ctrl-C does too)"),
    SlashCommand("edit", "/edit [N] TEXT", "replace message N's text (default: the last)"),
    SlashCommand("delete", "/delete N", "delete message N (/undo brings it back)"),
    SlashCommand("undo", "/undo", "undo the last /edit, /delete or /regen"),
    SlashCommand("branch", "/branch [N]", "continue in a new chat holding messages 0..N"),
    SlashCommand("history", "/history [N]", "show the last N messages (default 20)"),
    SlashCommand("persona", "/persona [NAME|off]", "speak as persona NAME in this chat"),
    SlashCommand(
        "note",
        "/note [TEXT | off | depth N | every N | role system|user|assistant]",
        "this chat's author's note",
    ),
    SlashCommand("book", "/book [NAME|off]", "this chat's own lorebook (chat lore)"),
    SlashCommand("rename", "/rename NAME", "rename this chat"),
    SlashCommand("chats", "/chats", "list this character's chats"),
    SlashCommand("open", "/open CHAT", "continue another chat (its name or id)"),
    SlashCommand(
        "qr",
        "/qr [LABEL | add LABEL TEXT | remove LABEL]",
        "quick replies: list them, send one, save or remove one",
    ),
    SlashCommand(
        "summary",
        "/summary [now | set TEXT]",
        "the chat's summary: show it, make a new one now, or replace it",
    ),
    SlashCommand("think", "/think", "show the last reply's reasoning"),
    SlashCommand("prompt", "/prompt", "show the prompt the next turn sends"),
    SlashCommand("lore", "/lore", "lorebook entries that fire on the next turn"),
    SlashCommand("vars", "/vars", "chat and global variables"),
    SlashCommand("help", "/help", "this list"),
    SlashCommand("quit", "/quit", "leave (Ctrl-C or Ctrl-D at the prompt too)", ("exit", "q")),
)

#: name or alias -> command
COMMANDS: dict[str, SlashCommand] = {
    alias: command for command in _TABLE for alias in (command.name, *command.aliases)
}


def help_text(width: int = 22) -> str:
    """The command table; a usage longer than ``width`` gets a line of its own."""
    lines = []
    for c in _TABLE:
        if len(c.usage) > width:
            lines += [c.usage, f"{'':<{width}}  {c.summary}"]
        else:
            lines.append(f"{c.usage:<{width}}  {c.summary}")
    return "\n".join(lines)


def split_command(line: str) -> tuple[str, str]:
    """``"/edit 2 text"`` -> ``("edit", "2 text")``."""
    name, _, rest = line[1:].partition(" ")
    return name.strip().lower(), rest.strip()


def no_argument(command: SlashCommand, arg: str) -> None:
    if arg:
        raise command.error(f"/{command.name} takes no argument (got {arg!r})")


def _integer(command: SlashCommand, arg: str, what: str) -> int:
    try:
        return int(arg)
    except ValueError:
        raise command.error(f"{what} must be a number, not {arg!r}") from None


def message_number(command: SlashCommand, arg: str, count: int) -> int:
    """``arg`` as the number of one of ``count`` messages (0 is the first)."""
    if not arg:
        raise command.error("a message number is needed")
    index = _integer(command, arg, "the message number")
    if count == 0:
        raise command.error("the chat has no messages")
    if not 0 <= index < count:
        raise command.error(f"no message #{index}; the chat has #0 to #{count - 1}")
    return index


def positive_number(command: SlashCommand, arg: str, what: str, *, zero: bool = False) -> int:
    number = _integer(command, arg, what)
    if number < (0 if zero else 1):
        raise command.error(f"{what} must be {'0 or more' if zero else '1 or more'}")
    return number
