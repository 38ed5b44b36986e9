"""How one chat message maps to a ``messages`` row plus ``swipes`` rows, and back.

The message's JSON keeps its keys in their order (SillyTavern's files are compared and hashed by
it), so the parts that live elsewhere stay in the body as ``null`` placeholders and
``extracted`` names them. ``mes`` is extracted when it is a string, ``swipes`` when it is a list
of strings, and ``swipe_info`` when it is a list and ``swipes`` was extracted; anything else (a
malformed file, or text with a lone surrogate, which UTF-8 columns cannot hold) stays inline in
the JSON, so the round trip is lossless either way.

Swipe row ``i`` holds ``swipes[i]`` (``text``) and ``swipe_info[i]`` (``info``, JSON text) side
by side; either may be absent because real files carry ``swipe_info`` lists shorter or longer
than ``swipes``. A gap inside ``swipe_info`` (only an append can make one) reads back as ``{}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tavernkit.models.chat_window import MessageCounts

__all__ = [
    "FLAG_HIDDEN",
    "FLAG_TOOLS",
    "FLAG_USER",
    "SplitMessage",
    "SwipeRow",
    "count_messages",
    "dumps",
    "join_message",
    "message_flags",
    "split_message",
]

#: Bits of a ``messages`` row's ``flags`` column: what the message model reads as ``is_system``,
#: ``is_user`` and a non-empty ``extra.tool_invocations``. They let a turn count the messages it
#: does not load (hidden, user, hidden with tool calls) with one indexed query.
FLAG_HIDDEN = 1
FLAG_USER = 2
FLAG_TOOLS = 4

_ORDER = ("mes", "swipes", "swipe_info")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BOOL: TypeAdapter[bool] = TypeAdapter(bool)


def dumps(value: Any) -> str:
    """Compact JSON text; non-ASCII kept as is (smaller rows, same values) except lone
    surrogates, which UTF-8 (and so SQLite) cannot hold: they are written as ``\\uXXXX``."""
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)


def _as_bool(value: object) -> bool:
    """``value`` as the message model's ``bool`` fields read it (pydantic's lax bool); a value
    the model would refuse counts as false (such a message does not load anyway)."""
    if value is True or value is False:
        return value
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return False


def message_flags(body: Mapping[str, Any]) -> int:
    """The ``flags`` bits of a message's JSON (see :data:`FLAG_HIDDEN`)."""
    flags = 0
    if _as_bool(body.get("is_system", False)):
        flags |= FLAG_HIDDEN
    if _as_bool(body.get("is_user", False)):
        flags |= FLAG_USER
    extra = body.get("extra")
    if isinstance(extra, Mapping):
        calls = extra.get("tool_invocations")
        if isinstance(calls, list) and calls:
            flags |= FLAG_TOOLS
    return flags


def count_messages(messages: Iterable[Mapping[str, Any]]) -> MessageCounts:
    """The :class:`MessageCounts` of message JSON documents (what the flags columns sum)."""
    total = hidden = user = hidden_tools = 0
    for message in messages:
        flags = message_flags(message)
        total += 1
        hidden += flags & FLAG_HIDDEN
        user += (flags & FLAG_USER) >> 1
        hidden_tools += (flags & (FLAG_HIDDEN | FLAG_TOOLS)) == (FLAG_HIDDEN | FLAG_TOOLS)
    return MessageCounts(total, hidden, user, hidden_tools)


#: what a TEXT column of one of the stores cannot hold: lone surrogates (UTF-8 has no bytes
#: for them) and NUL (PostgreSQL's text has none)
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def _storable(text: object) -> bool:
    """A string every store's TEXT column can hold as it is; others stay in the JSON (where
    they are escaped)."""
    return isinstance(text, str) and _UNSTORABLE.search(text) is None


@dataclass(frozen=True, slots=True)
class SwipeRow:
    idx: int
    text: str | None
    info: str | None
    partial: bool = False


@dataclass(frozen=True, slots=True)
class SplitMessage:
    body: dict[str, Any]
    extracted: frozenset[str]
    mes: str | None
    swipes: list[SwipeRow]

    @property
    def body_json(self) -> str:
        return dumps(self.body)

    @property
    def flags(self) -> int:
        return message_flags(self.body)

    @property
    def extracted_text(self) -> str:
        return encode_extracted(self.extracted)


def encode_extracted(keys: Iterable[str]) -> str:
    present = set(keys)
    return ",".join(k for k in _ORDER if k in present)


def decode_extracted(text: str) -> frozenset[str]:
    return frozenset(k for k in text.split(",") if k)


def split_message(message: Mapping[str, Any]) -> SplitMessage:
    body = dict(message)
    extracted: set[str] = set()
    mes = body.get("mes")
    if isinstance(mes, str) and _storable(mes):
        extracted.add("mes")
        body["mes"] = None
    else:
        mes = None
    swipes = body.get("swipes")
    infos = body.get("swipe_info")
    texts: list[str] = []
    info_list: list[Any] = []
    if isinstance(swipes, list) and all(_storable(s) for s in swipes):
        extracted.add("swipes")
        body["swipes"] = None
        texts = swipes
        if isinstance(infos, list):
            extracted.add("swipe_info")
            body["swipe_info"] = None
            info_list = infos
    rows = [
        SwipeRow(
            idx=i,
            text=texts[i] if i < len(texts) else None,
            info=dumps(info_list[i]) if i < len(info_list) else None,
        )
        for i in range(max(len(texts), len(info_list)))
    ]
    return SplitMessage(body=body, extracted=frozenset(extracted), mes=mes, swipes=rows)


def join_message(
    body: Mapping[str, Any],
    extracted: frozenset[str],
    mes: str | None,
    swipes: Iterable[SwipeRow],
) -> dict[str, Any]:
    """The message JSON again; ``swipes`` in any order."""
    out = dict(body)
    if "mes" in extracted:
        out["mes"] = mes
    if "swipes" in extracted:
        ordered = sorted(swipes, key=lambda r: r.idx)
        out["swipes"] = [r.text for r in ordered if r.text is not None]
        if "swipe_info" in extracted:
            with_info = [r for r in ordered if r.info is not None]
            size = with_info[-1].idx + 1 if with_info else 0
            by_idx = {r.idx: r.info for r in with_info}
            out["swipe_info"] = [
                json.loads(text) if (text := by_idx.get(i)) is not None else {} for i in range(size)
            ]
    return out
