"""uvicorn's HTTP protocol, with a response's head written together with its first body bytes.

uvicorn writes a response's status line and headers the moment the app sends
``http.response.start``, and each body message in a write of its own. Every write is a
packet, and on loopback or a LAN each packet wakes the client: a streamed reply's first token
reached the client one write (a syscall, and the client's wake-up for a head it cannot use
yet) after the head, 0.2 ms later on this project's VM, on every streamed response (the
facade's, a turn's events). Here the head waits for the next write on its connection, so the
two leave as one packet; whatever happens, it waits no longer than the rest of the loop's
current step (a ``call_soon``), so a response whose first body comes later (an event stream
waiting for its first event) shows its head as promptly as before.

Only a response head is held (a write of ``HTTP/1.x NNN ...`` ending the header block); a
``100 Continue`` interim response goes out at once, as the client waits for it before it
sends the body. Order is kept: a held head goes out before anything else written after it,
and before the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:  # httptools is uvicorn's faster parser; h11 is its pure-Python fallback
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - the server extra installs httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

__all__ = ["HeadHoldingTransport", "HttpProtocol", "is_response_head"]


def is_response_head(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is a whole final response head (not ``100 Continue``)."""
    head = bytes(data[:13])
    return (
        head.startswith((b"HTTP/1.1 ", b"HTTP/1.0 "))
        and not head.startswith(b"1", 9)
        and bytes(data[-4:]) == b"\r\n\r\n"
    )


class HeadHoldingTransport:
    """``transport`` with a response head held until the next write, the end of the loop's
    current step, or the connection's end (see the module docstring); every other call goes
    to ``transport``."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._flush_at_step_end: asyncio.Handle | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._take()
        if held is not None:
            self._transport.write(held + bytes(data))
        elif is_response_head(data) and not self._transport.is_closing():
            self._held = bytes(data)
            self._flush_at_step_end = self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def flush(self) -> None:
        """Write the held head now, if one is held."""
        held = self._take()
        if held is not None and not self._transport.is_closing():  # the client is gone
            self._transport.write(held)

    def _take(self) -> bytes | None:
        held, self._held = self._held, None
        if self._flush_at_step_end is not None:
            self._flush_at_step_end.cancel()
            self._flush_at_step_end = None
        return held

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._take()  # an aborted connection sends nothing more
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        # get_extra_info, is_closing, pause_reading, set_protocol...: the real transport's
        return getattr(self._transport, name)


class HttpProtocol(_Base):
    """uvicorn's protocol (httptools when installed, else h11) over a
    :class:`HeadHoldingTransport`: what ``tavernkit serve`` runs (``uvicorn.Config(http=)``)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        holding = HeadHoldingTransport(transport, self.loop)
        super().connection_made(holding)  # type: ignore[arg-type]
