"""Finding the trigger line outside reasoning blocks, in one piece or as a stream.

A trigger only counts outside ``<think>``/``<thought>`` blocks (nesting-aware): models that
reason in the text often rehearse the call there first. The first such trigger ends the
visible text; everything after it is the protocol payload. The streaming detector gives the
same split for any chunking of the same text, because it holds back any tail that could still
grow into the trigger or a reasoning tag.
"""

from __future__ import annotations

import re

__all__ = ["StreamDetector", "split_at_trigger"]

_TAG_NAMES = ("think", "thought")
_TAGS = tuple(f"<{n}>" for n in _TAG_NAMES) + tuple(f"</{n}>" for n in _TAG_NAMES)


def _token_pattern(trigger: str) -> re.Pattern[str]:
    return re.compile(f"(?P<trigger>{re.escape(trigger)})|(?i:<(?P<close>/?)(?:think|thought)>)")


def _scan(pattern: re.Pattern[str], text: str, depth: int) -> tuple[int | None, int, int]:
    """(start of the first depth-0 trigger or None, depth after the scan, end of last token)."""
    last_end = 0
    for m in pattern.finditer(text):
        last_end = m.end()
        if m.group("trigger") is not None:
            if depth == 0:
                return m.start(), depth, last_end
            continue
        depth = max(0, depth - 1) if m.group("close") else depth + 1
    return None, depth, last_end


def split_at_trigger(text: str, trigger: str) -> tuple[str, str | None]:
    """``(visible, payload)``: the text before the first trigger outside reasoning blocks,
    and what follows the trigger (``None`` when there is no such trigger)."""
    start, _, _ = _scan(_token_pattern(trigger), text, 0)
    if start is None:
        return text, None
    return text[:start], text[start + len(trigger) :]


def _held_tail(buf: str, floor: int, trigger: str) -> int:
    """Start index of the longest tail of ``buf`` (at or after ``floor``) that is a proper
    prefix of the trigger or of a reasoning tag; ``len(buf)`` when none."""
    longest = max(len(trigger), *(len(t) for t in _TAGS)) - 1
    for start in range(max(floor, len(buf) - longest), len(buf)):
        tail = buf[start:]
        if trigger.startswith(tail) and tail != trigger:
            return start
        low = tail.lower()
        if any(tag.startswith(low) and tag != low for tag in _TAGS):
            return start
    return len(buf)


class StreamDetector:
    """Feed reply chunks; get back the text that may be shown now.

    Ordinary text passes through (minus a short held-back tail that might be the start of
    the trigger). From the trigger on, nothing more is shown: :attr:`hidden_text` collects the
    payload and :attr:`raw_text` the whole reply for the parser. If parsing later fails and no
    call was required, the caller shows :attr:`hidden_text` after all.
    """

    def __init__(self, trigger: str) -> None:
        if not trigger:
            raise ValueError("trigger must not be empty")
        self.trigger = trigger
        self._pattern = _token_pattern(trigger)
        self._pending = ""
        self._depth = 0
        self._raw: list[str] = []
        self._visible: list[str] = []
        self._hidden: list[str] = []
        self.triggered = False
        self.finished = False

    def feed(self, chunk: str) -> str:
        if self.finished:
            raise RuntimeError("feed() after finish()")
        self._raw.append(chunk)
        if self.triggered:
            self._hidden.append(chunk)
            return ""
        buf = self._pending + chunk
        start, self._depth, last_end = _scan(self._pattern, buf, self._depth)
        if start is not None:
            self.triggered = True
            self._pending = ""
            self._hidden.append(buf[start:])
            return self._emit(buf[:start])
        keep = _held_tail(buf, last_end, self.trigger)
        self._pending = buf[keep:]
        return self._emit(buf[:keep])

    def finish(self) -> str:
        """End of stream: release any held-back tail (it was ordinary text after all)."""
        self.finished = True
        tail, self._pending = self._pending, ""
        return self._emit(tail)

    def _emit(self, text: str) -> str:
        if text:
            self._visible.append(text)
        return text

    @property
    def visible_text(self) -> str:
        return "".join(self._visible)

    @property
    def hidden_text(self) -> str:
        return "".join(self._hidden)

    @property
    def raw_text(self) -> str:
        return "".join(self._raw)
