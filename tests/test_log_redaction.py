"""The library loggers' redacting filters, record by record: what each keeps and drops."""

from __future__ import annotations

import logging

import pytest

from tavernkit.log_redaction import redact_url

SECRET = "sk-canary-0042"


def _line(caplog: pytest.LogCaptureFixture, logger: str, msg: str, *args: object) -> str:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=logger):
        logging.getLogger(logger).info(msg, *args)
    (record,) = caplog.records
    return record.getMessage()


def test_transport_lines_keep_the_event_and_a_connects_host_and_port(
    caplog: pytest.LogCaptureFixture,
) -> None:
    headers = f"return_value=(b'HTTP/1.1', 200, b'OK', [(b'x-echo', b'{SECRET}')])"
    line = _line(caplog, "httpcore2.http11", f"receive_response_headers.complete {headers}")
    assert line == "receive_response_headers.complete"
    connect = "connect_tcp.started host='api.example' port=443 local_address=None timeout=5"
    line = _line(caplog, "httpcore2.connection", connect)
    assert line == "connect_tcp.started host='api.example' port=443"


def test_client_urls_lose_query_and_user_info(caplog: pytest.LogCaptureFixture) -> None:
    url = f"https://me:{SECRET}@api.example:8443/v1/models?key={SECRET}&alt=sse"
    line = _line(caplog, "httpx2", 'HTTP Request: %s %s "%s"', "GET", url, "HTTP/1.1 200 OK")
    assert line == 'HTTP Request: GET https://api.example:8443/v1/models "HTTP/1.1 200 OK"'
    assert redact_url("not a url") == "not a url"


def test_a_responses_own_reason_phrase_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The status line's words are the peer's (an upstream may put anything there)."""
    request = 'HTTP Request: %s %s "%s %d %s"'
    url = "https://api.example/v1"
    line = _line(caplog, "httpx2", request, "POST", url, "HTTP/1.1", 401, f"go away {SECRET}")
    assert line == 'HTTP Request: POST https://api.example/v1 "HTTP/1.1 401 Unauthorized"'
    line = _line(caplog, "httpx2", request, "POST", url, "HTTP/1.1", 599, SECRET)
    assert line == 'HTTP Request: POST https://api.example/v1 "HTTP/1.1 599 "'


def test_the_url_macro_alone_installs_the_http_filters() -> None:
    """Renderer-only use (no provider imported) still redacts httpx2's DEBUG lines."""
    import subprocess
    import sys

    code = (
        "import logging, tavernkit.text.render.url, sys\n"
        "names = ('httpx2', 'httpcore2.connection', 'httpcore2.http11')\n"
        "sys.exit(0 if all(logging.getLogger(n).filters for n in names) else 1)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, timeout=60)
    assert done.returncode == 0
