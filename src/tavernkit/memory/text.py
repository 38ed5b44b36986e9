"""The texts memory embeds and queries, cut and joined as SillyTavern's Vector Storage does.

``split_recursive`` is ``splitRecursive`` (utils.js): split on the first delimiter, split the
parts that are still too long on the next ones, then merge neighbours greedily with *this
level's* delimiter. Lengths count UTF-16 units as JavaScript does; a ``""`` split yields code
points here (JavaScript splits surrogate pairs, which only changes texts with emoji).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence

from tavernkit.jscompat import cyrb53, utf16_len
from tavernkit.models.chat import Message

__all__ = [
    "DEFAULT_DELIMITERS",
    "collapse_newlines",
    "message_hash",
    "query_text",
    "split_recursive",
]

DEFAULT_DELIMITERS: tuple[str, ...] = ("\n\n", "\n", " ", "")
_NEWLINES = re.compile(r"\n+")


def collapse_newlines(text: str) -> str:
    """``collapseNewlines``: every run of newlines becomes one."""
    return _NEWLINES.sub("\n", text)


def split_recursive(
    text: str, length: int, delimiters: Sequence[str] = DEFAULT_DELIMITERS
) -> list[str]:
    """``text`` in pieces of at most ``length`` UTF-16 units (``length <= 0``: one piece)."""
    if length <= 0:
        return [text]
    delim = delimiters[0] if delimiters else ""
    parts = list(text) if delim == "" else text.split(delim)
    flat: list[str] = []
    for part in parts:
        # a one-unit piece cannot be cut further (JavaScript recurses forever on length 1)
        if utf16_len(part) < length or (delim == "" and not delimiters[1:]):
            flat.append(part)
        else:
            flat.extend(split_recursive(part, length, delimiters[1:]))
    out: list[str] = []
    i = 0
    while i < len(flat):
        chunk = flat[i]
        size = utf16_len(chunk)
        j = i + 1
        while j < len(flat):
            nxt = utf16_len(flat[j])
            if size + nxt + len(delim) > length:
                break
            chunk += delim + flat[j]
            size += len(delim) + nxt
            j += 1
        out.append(chunk)
        i = j
    return out


def chunk_delimiters(force_delimiter: str) -> tuple[str, ...]:
    """The delimiters a chat message is chunked on (the forced one first, when set)."""
    return (force_delimiter, *DEFAULT_DELIMITERS) if force_delimiter else DEFAULT_DELIMITERS


@functools.lru_cache(maxsize=262_144)
def message_hash(text: str) -> int:
    """``getStringHash``: a chat text's identity in its collection (cyrb53, 53 bits).
    Remembered: every turn re-hashes the whole chat to find what is new, and cyrb53 in
    Python is the costliest part of a memory turn (SillyTavern memoises it too)."""
    return cyrb53(text)


def query_text(messages: Iterable[Message], count: int, substitute: Callable[[str], str]) -> str:
    """``getQueryText``: the last ``count`` non-empty messages (macros resolved), newest
    first, joined with ``\\n``, newline runs collapsed, trimmed. ``messages`` oldest first."""
    texts: list[str] = []
    for message in reversed(list(messages)):
        if len(texts) >= count:
            break
        text = substitute(message.text.strip())
        if text:
            texts.append(text)
    return collapse_newlines("\n".join(texts)).strip()
