"""Example dialogue: ``<START>`` blocks, and their split into example messages.

Both prompt kinds split a card's ``mes_example`` into blocks (``parseMesExamples``); chat
completion then splits each block into ``example_user`` / ``example_assistant`` messages
(``parseExampleIntoIndividual``), text completion formats the blocks as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tavernkit.jscompat import js_trim

__all__ = ["ExampleMessage", "parse_example_block", "parse_mes_examples"]

_START = re.compile(r"<START>", re.IGNORECASE)


def parse_mes_examples(text: str, *, heading: str = "<START>\n") -> list[str]:
    """The example blocks of ``text``, each ``heading + block.trim() + "\\n"``.

    ``heading`` is ``"<START>\\n"`` for chat completion and instruct mode, else the context
    template's example separator plus a newline.
    """
    if not text or text == "<START>":
        return []
    if not text.startswith("<START>"):
        text = "<START>\n" + js_trim(text)
    return [f"{heading}{js_trim(block)}\n" for block in _START.split(text)[1:]]


@dataclass(frozen=True, slots=True)
class ExampleMessage:
    role: str
    content: str
    #: ``example_user`` or ``example_assistant``.
    name: str


def parse_example_block(
    block: str,
    *,
    user: str,
    char: str,
    group_members: Sequence[str] = (),
    in_group: bool = False,
) -> list[ExampleMessage]:
    """One block as example messages (``setOpenAIMessageExamples`` + its splitter).

    The first line (the ``<START>`` heading) is dropped; a line starting ``User:`` opens a user
    turn, ``Char:`` (or a group member's name) an assistant turn; lines before the first
    speaker belong to the first turn. Each message loses its first ``Name:`` and is trimmed.
    """
    text = _START.sub("{Example Dialogue:}", block, count=1).replace("\r", "")
    lines = text.split("\n")
    member_prefixes = [f"{name}:" for name in group_members]
    result: list[ExampleMessage] = []
    current: list[str] = []
    in_user = in_bot = False
    bot_name = char

    def add(name: str, system_name: str) -> None:
        content = js_trim("\n".join(current).replace(name + ":", "", 1))
        if in_group:
            content = f"{name}: {content}"
        result.append(ExampleMessage("system", content, system_name))
        current.clear()

    for line in lines[1:]:
        if line.startswith(user + ":"):
            in_user = True
            if in_bot:
                add(bot_name, "example_assistant")
            in_bot = False
        elif line.startswith(char + ":") or any(line.startswith(p) for p in member_prefixes):
            if not line.startswith(char + ":") and member_prefixes:
                bot_name = line.split(":")[0]
            in_bot = True
            if in_user:
                add(user, "example_user")
            in_user = False
        current.append(line)
    if in_user:
        add(user, "example_user")
    elif in_bot:
        add(bot_name, "example_assistant")
    return result
