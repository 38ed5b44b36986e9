"""Logging filters that keep secrets and chat text out of the libraries' log lines.

Our own loggers log outcomes, ids and counts only (the SQLite store's connection,
:mod:`tavernkit.store.sqlite_thread`, logs nothing). The libraries under the HTTP layer log
more: the HTTP transport (``httpcore2.*``) logs request and response details at DEBUG, and
the HTTP client (``httpx2``) logs each URL at INFO, where a user's base URL may carry a key in
its query or credentials. Raising those loggers' levels would also hide the lines that help
(which call ran, which connection opened, which status came back), and a user who sets them
to DEBUG would get the secrets back; so each gets a filter on its logger that rewrites the
record in place, keeping its shape and dropping the data:

- ``httpcore2.*``: the trace event name, plus ``host``/``port`` of a connect;
- ``httpx2``: URLs without query string or user info, and a response's reason phrase replaced
  by the standard one for its status (the peer chose its own words).

The HTTP layer installs them when it is imported: whoever uses the library installs its
filter. :func:`install` is idempotent.
"""

from __future__ import annotations

import logging
import re
from http import HTTPStatus
from urllib.parse import urlsplit, urlunsplit

__all__ = ["install", "redact_url"]

_HTTPCORE_LOGGERS = (
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
)
_CONNECT_DETAILS = re.compile(r"\b(?:host|port)=(?:'[^']*'|\d+)")


def redact_url(url: object) -> str:
    """``url`` without its query string and user info (either may hold a key)."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<url>"
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "") if parts.netloc else ""
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _TransportFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        event, _, details = message.partition(" ")
        kept = _CONNECT_DETAILS.findall(details) if event.startswith("connect_") else []
        record.msg = " ".join([event, *kept])
        record.args = None
        return True


#: httpx2's line per request: method, URL, HTTP version, status and the peer's reason phrase
_REQUEST_LINE = 'HTTP Request: %s %s "%s %d %s"'


def _standard_phrase(status: object) -> str:
    if not isinstance(status, int):
        return ""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class _ClientFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            args = [redact_url(a) if _looks_like_url(a) else a for a in record.args]
            if record.msg == _REQUEST_LINE and len(args) == 5:
                args[4] = _standard_phrase(args[3])  # the peer wrote its own: not logged
            record.args = tuple(args)
        return True


def _looks_like_url(value: object) -> bool:
    return type(value).__name__ == "URL" or (
        isinstance(value, str) and value.startswith(("http://", "https://"))
    )


_FILTERS: dict[str, type[logging.Filter]] = {
    "httpx2": _ClientFilter,
    **dict.fromkeys(_HTTPCORE_LOGGERS, _TransportFilter),
}


def install(*names: str) -> None:
    """Put the redacting filter on each named logger (``httpx2``, ``httpcore2``: the
    transport's loggers under it), once."""
    for name in names:
        targets = [n for n in _FILTERS if n == name or n.startswith(name + ".")]
        for target in targets:
            logger = logging.getLogger(target)
            kind = _FILTERS[target]
            if not any(isinstance(f, kind) for f in logger.filters):
                logger.addFilter(kind())
