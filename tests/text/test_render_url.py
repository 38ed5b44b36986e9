"""``{{url}}`` against a real HTTP server on 127.0.0.1 (no external network)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tavernkit.text.render import PromptRenderer, RenderResult, UrlPolicy
from tavernkit.text.render import url as url_module


class _Handler(BaseHTTPRequestHandler):
    hosts: list[str] = []  # noqa: RUF012 - shared with the test through the class

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.end_headers()
        # The client may have given up already (the timeout test).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def do_GET(self) -> None:
        _Handler.hosts.append(self.headers.get("Host", ""))
        port = self.server.server_address[1]
        if self.path == "/hello":
            self._reply(200, "héllo {{user}}".encode())
        elif self.path == "/big":
            self._reply(200, b"x" * 5000)
        elif self.path == "/slow":
            time.sleep(1.0)
            self._reply(200, b"late")
        elif self.path == "/redirect-local":
            self._reply(302, b"", {"Location": "/hello"})
        elif self.path == "/redirect-other":
            self._reply(302, b"", {"Location": f"http://localhost:{port}/hello"})
        elif self.path == "/loop":
            self._reply(302, b"", {"Location": "/loop"})
        else:
            self._reply(404, b"missing")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self._reply(200, b"POST:" + body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


LOCAL = UrlPolicy(enabled=True, allowed_hosts=frozenset({"127.0.0.1"}), allow_private=True)


async def render(renderer: PromptRenderer, template: str) -> RenderResult:
    return await renderer.render_template(template)


async def test_disabled_by_default(server: str) -> None:
    result = await render(PromptRenderer(), f"{{{{url::GET::http://{server}/hello}}}}")
    assert result.text == f"{{{{url::GET::http://{server}/hello}}}}"
    assert result.warnings == ()


async def test_get_when_allowed(server: str) -> None:
    result = await render(PromptRenderer(url=LOCAL), f"[{{{{url::GET::http://{server}/hello}}}}]")
    # The body is text, never rendered again.
    assert result.text == "[héllo {{user}}]"
    assert result.variables == ["url"]


async def test_post_with_body(server: str) -> None:
    result = await render(
        PromptRenderer(url=LOCAL), f"{{{{url::post::http://{server}/echo::a=1&b={{{{user}}}}}}}}"
    )
    assert result.text == "POST:a=1&b=User"


async def test_loopback_refused_unless_explicitly_allowed(server: str) -> None:
    policy = UrlPolicy(enabled=True, allowed_hosts=frozenset({"127.0.0.1", "localhost"}))
    renderer = PromptRenderer(url=policy)
    for host in (server, server.replace("127.0.0.1", "localhost")):
        result = await render(renderer, f"{{{{url::GET::http://{host}/hello}}}}")
        assert result.text.startswith("{{url::GET::")
        assert any("loopback" in w for w in result.warnings), result.warnings


async def test_host_not_on_allow_list(server: str) -> None:
    policy = UrlPolicy(enabled=True, allowed_hosts=frozenset({"example.org"}), allow_private=True)
    result = await render(PromptRenderer(url=policy), f"{{{{url::GET::http://{server}/hello}}}}")
    assert result.text.startswith("{{url::")
    assert any("allow-list" in w for w in result.warnings)


async def test_redirects_are_rechecked(server: str) -> None:
    renderer = PromptRenderer(url=LOCAL)
    ok = await render(renderer, f"{{{{url::GET::http://{server}/redirect-local}}}}")
    assert ok.text == "héllo {{user}}"
    refused = await render(renderer, f"{{{{url::GET::http://{server}/redirect-other}}}}")
    assert refused.text.startswith("{{url::")
    assert any("'localhost' is not on the allow-list" in w for w in refused.warnings)
    looping = await render(renderer, f"{{{{url::GET::http://{server}/loop}}}}")
    assert any("redirects" in w for w in looping.warnings)


async def test_response_size_cap(server: str) -> None:
    policy = UrlPolicy(
        enabled=True,
        allowed_hosts=frozenset({"127.0.0.1"}),
        allow_private=True,
        max_response_bytes=100,
    )
    result = await render(PromptRenderer(url=policy), f"{{{{url::GET::http://{server}/big}}}}")
    assert result.text == "x" * 100


async def test_timeout(server: str) -> None:
    started = time.perf_counter()
    result = await render(
        PromptRenderer(url=LOCAL), f"{{{{url::GET::http://{server}/slow::::0.2}}}}"
    )
    assert time.perf_counter() - started < 0.9
    assert result.text.startswith("{{url::")
    assert any("timed out" in w for w in result.warnings)


async def test_bad_arguments(server: str) -> None:
    renderer = PromptRenderer(url=LOCAL)
    for template, reason in [
        ("{{url::GET}}", "METHOD::URL"),
        (f"{{{{url::TRACE::http://{server}/hello}}}}", "method 'TRACE'"),
        ("{{url::GET::file:///etc/passwd}}", "scheme 'file'"),
        (f"{{{{url::GET::http://{server}/hello::::soon}}}}", "number of seconds"),
    ]:
        result = await render(renderer, template)
        assert result.text.startswith("{{url::"), template
        assert any(reason in w for w in result.warnings), (template, result.warnings)


async def test_connects_to_the_checked_address(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name is resolved once; the request goes to that address with the Host kept."""
    port = int(server.rsplit(":", 1)[1])

    async def fake_resolve(host: str, _port: int) -> list[str]:
        assert host == "ledger.test"
        return ["127.0.0.1"]

    monkeypatch.setattr(url_module, "_resolve", fake_resolve)
    _Handler.hosts.clear()
    policy = UrlPolicy(enabled=True, allowed_hosts=frozenset({"*.test"}), allow_private=True)
    result = await render(
        PromptRenderer(url=policy), f"{{{{url::GET::http://ledger.test:{port}/hello}}}}"
    )
    assert result.text == "héllo {{user}}"
    assert _Handler.hosts == [f"ledger.test:{port}"]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("224.0.0.1", False),
    ],
)
def test_address_policy(address: str, public: bool) -> None:
    assert UrlPolicy(enabled=True).address_allowed(address) is public


def test_host_patterns() -> None:
    policy = UrlPolicy(enabled=True, allowed_hosts=frozenset({"API.example.com.", "*.cdn.net"}))
    assert policy.host_allowed("api.example.com")
    assert policy.host_allowed("a.b.cdn.net")
    assert not policy.host_allowed("cdn.net")
    assert not policy.host_allowed("evil-cdn.net")
    assert not policy.host_allowed("example.com")
    assert UrlPolicy(allowed_hosts=frozenset({"*"})).host_allowed("anything.io")
