"""An incremental Server-Sent Events decoder that survives what real servers send.

Feed it the body's bytes in whatever pieces the network delivers; it returns the events each
piece completed. It follows the WHATWG event-stream rules with these decisions:

- lines end in ``\\n``, ``\\r\\n`` or ``\\r`` — also mixed in one stream (sse-starlette pings),
  and a ``\\r\\n`` split across two chunks counts once;
- bytes are buffered and split on line ends *before* decoding, so a UTF-8 character split
  across chunks is never broken; invalid UTF-8 is a :class:`~tavernkit.errors.ProtocolError`;
- ``:`` comment lines (``: OPENROUTER PROCESSING``, ``: keep-alive``) are counted in
  :attr:`SSEDecoder.comments` and produce no event, so they never reset an idle timer;
- several ``data:`` lines are joined with ``\\n``; a leading UTF-8 BOM is dropped;
- at EOF, :meth:`SSEDecoder.flush` dispatches an event that was not followed by a blank line
  (the spec would discard it, but Anthropic's and KoboldCpp's real streams end that way and
  every SDK keeps it);
- ``[DONE]`` is not special here: it is an adapter's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from tavernkit.errors import ProtocolError

__all__ = ["SSEDecoder", "SSEEvent"]

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. ``event`` is ``None`` when the stream sent no ``event:`` line."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Stateful decoder: :meth:`feed` each chunk, then :meth:`flush` at EOF."""

    __slots__ = (
        "_buf",
        "_data",
        "_event",
        "_id",
        "_retry",
        "_skip_lf",
        "_started",
        "comments",
        "events",
        "source",
    )

    def __init__(self, *, source: str | None = None) -> None:
        self._buf = b""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        #: ``:`` comment lines seen so far (keep-alives).
        self.comments = 0
        #: events dispatched so far.
        self.events = 0
        self.source = source

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one chunk; returns the events it completed (often none or one)."""
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
        if self._skip_lf and buf:
            self._skip_lf = False
            if buf[:1] == b"\n":
                buf = buf[1:]
        ends_cr = False
        if b"\r" in buf:
            if buf[-1:] == b"\r":
                ends_cr = True
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        if ends_cr:
            self._buf = b""
            self._skip_lf = True
        else:
            self._buf = lines.pop()
        out: list[SSEEvent] = []
        for line in lines:
            self._line(line, out)
        return out

    def flush(self) -> list[SSEEvent]:
        """End of stream: finish a last line and a last event that had no blank line."""
        out: list[SSEEvent] = []
        if self._buf:
            buf = self._buf
            self._buf = b""
            if not self._started and buf.startswith(_BOM):
                buf = buf[3:]
            self._started = True
            self._line(buf, out)
        self._dispatch(out)
        return out

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        if not raw:
            self._dispatch(out)
            return
        if raw[:1] == b":":
            self.comments += 1
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                f"invalid UTF-8 in event stream at byte {exc.start}", provider=self.source
            ) from None
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if not self._data:
            self._event = None
            return
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        out.append(SSEEvent(data, self._event, self._id, self._retry))
        self.events += 1
        self._data = []
        self._event = None
