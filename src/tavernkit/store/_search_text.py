"""What a message search does with the text it is given, whatever the database: the terms a
query holds, how each is written for SQLite's FTS5 and PostgreSQL's ``to_tsquery`` so that no
input can break their syntax, and the snippet shown for a hit.

A query is terms separated by white space, each of which the message must contain (an AND);
a part in double quotes is one term, spaces included (``"red dragon"``). Every term is then
matched as literal text: the operators of the databases' query languages (``AND``, ``OR``,
``NEAR``, parentheses, ``*``, ``:``) mean nothing here, and a lone ``"`` is a term of its own.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = [
    "MAX_TERMS",
    "SNIPPET_CHARS",
    "TRIGRAM_MIN",
    "fts5_phrase",
    "has_no_word_breaks",
    "make_snippet",
    "parse_query",
    "prefix_tsquery",
    "searchable",
]

#: the most terms one query uses (the rest are dropped): each costs a condition per hit
MAX_TERMS = 16
#: the trigram index finds terms of at least this many characters; shorter ones are checked
#: against the text of each message in scope instead
TRIGRAM_MIN = 3
#: about how long a snippet is, in characters
SNIPPET_CHARS = 160

#: a quoted part, or a run of anything but white space
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_SPACES = re.compile(r"\s+")
#: a letter or digit: what PostgreSQL's text parser makes words of
_WORD_CHAR = re.compile(r"[^\W_]")


def parse_query(query: str) -> list[str]:
    """The terms of ``query`` (see the module docstring), each once whatever its case, at
    most :data:`MAX_TERMS`. A query that holds nothing but quotes is one literal term."""
    terms: list[str] = []
    seen: set[str] = set()
    for quoted, bare in _TERM.findall(query):
        # a bare run keeps its quotes only when it is nothing else (a lone ``"``)
        term = quoted.strip() if quoted else (bare.strip('"') or bare)
        key = term.casefold()
        if term and key not in seen:
            seen.add(key)
            terms.append(term)
    if not terms and query.strip():
        terms.append(query.strip())
    return terms[:MAX_TERMS]


def searchable(term: str) -> bool:
    """Whether a stored text could hold ``term``: the message text columns never hold NUL or a
    lone surrogate (those messages keep their text inside the JSON, unindexed)."""
    return not any(c == "\x00" or "\ud800" <= c <= "\udfff" for c in term)


def fts5_phrase(term: str) -> str:
    """``term`` as one FTS5 string: double quotes around it, its own doubled. Inside a string
    FTS5 reads no operator, so any text is safe; the trigram tokenizer then matches it as a
    substring (case-insensitively)."""
    return '"' + term.replace('"', '""') + '"'


def prefix_tsquery(term: str) -> str:
    """``term`` as ``to_tsquery`` text that finds its words as word prefixes: one quoted
    lexeme (quotes doubled, backslashes escaped), which ``to_tsquery`` splits into the same
    words the text parser makes of a message, followed by ``:*``."""
    quoted = term.replace("\\", "\\\\").replace("'", "''")
    return f"'{quoted}':*"


#: scripts written without spaces between words: PostgreSQL's parser makes one "word" of a
#: whole run of them, so a word inside it is found by substring only
_UNSPACED_SCRIPTS = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
)


def has_no_word_breaks(term: str) -> bool:
    """Whether PostgreSQL's word index cannot find ``term``: it has no letter or digit (only
    punctuation, symbols, emoji), or some of it is in a script written without spaces."""
    if _WORD_CHAR.search(term) is None:
        return True
    return any(_unspaced(c) for c in term if ord(c) >= 0x0E00)


def _unspaced(char: str) -> bool:
    name = unicodedata.name(char, "")
    return name.startswith(_UNSPACED_SCRIPTS)


def make_snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the first place a term occurs (the start
    when none is found as Python folds case), on one line, cut at spaces where it can be, with
    ``…`` where text was left out. Plain text: the client escapes and highlights it."""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= width:
        return flat
    found = [
        (m.start(), m.end())
        for term in terms
        if (m := re.search(re.escape(_SPACES.sub(" ", term)), flat, re.IGNORECASE)) is not None
    ]
    first, last = min(found) if found else (0, 0)
    start = max(0, min(first - width // 3, len(flat) - width))
    if start > 0:
        # start at a word when one begins soon enough before the match
        space = flat.find(" ", start, first)
        if space != -1 and space - start < 24:
            start = space + 1
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", max(last, start + width // 2), end)
        if space != -1:
            end = space
    return ("…" if start > 0 else "") + flat[start:end] + ("…" if end < len(flat) else "")
