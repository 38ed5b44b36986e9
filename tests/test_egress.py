"""The egress policy itself (:mod:`tavernkit.egress`), over real sockets on loopback: which
addresses it refuses, what an allow-list admits, the connection going to the address that was
checked (a second DNS answer cannot swap in another), every redirect hop checked, and only
http(s)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest

from tavernkit.egress import EgressPolicy, address_refusal, egress_client
from tavernkit.errors import EgressRefused

#: the allow-listed loopback address the tests' allowed servers listen on
ALLOWED = "127.0.0.2"


@dataclass
class Site:
    """A tiny HTTP server: answers ``answer`` and records each request's Host header."""

    host: str
    answer: bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
    port: int = 0
    hosts: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def site(
    host: str, answer: bytes | None = None, *, tls: ssl.SSLContext | None = None
) -> AsyncIterator[Site]:
    served = Site(host) if answer is None else Site(host, answer)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        for line in head.decode().split("\r\n"):
            if line.lower().startswith("host:"):
                served.hosts.append(line.split(":", 1)[1].strip())
        writer.write(served.answer)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, host, 0, ssl=tls)
    served.port = server.sockets[0].getsockname()[1]
    try:
        yield served
    finally:
        server.close()


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("93.184.216.34", None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("2002:7f00:1::", "a loopback address"),  # 6to4 of 127.0.0.1
        ("64:ff9b::7f00:1", "a loopback address"),  # NAT64 of 127.0.0.1
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fc00::1", "a private address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1%eth0", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("100.64.0.1", "a reserved address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("168.63.129.16", "a cloud metadata address"),  # Azure's: a public address
        ("100.100.100.200", "a cloud metadata address"),
    ],
)
def test_which_addresses_are_refused(address: str, refused: str | None) -> None:
    assert address_refusal(address) == refused


def test_an_allow_list_admits_its_networks_and_names() -> None:
    policy = EgressPolicy.parse(["10.0.0.0/8", "::1", "Ollama.LAN.", "*.corp.example"])
    assert policy.refusal("10.9.8.7") is None
    assert policy.refusal("::1") is None
    assert policy.refusal("::ffff:10.0.0.1") is None  # the IPv4 address inside
    assert policy.refusal("192.168.0.1") == "a private address"
    assert policy.allows_host("ollama.lan") and policy.allows_host("a.b.corp.example")
    assert not policy.allows_host("corp.example") and not policy.allows_host("evil-corp.example")
    for bad in ("not a host!", "", "http://x"):
        with pytest.raises(ValueError):
            EgressPolicy.parse([bad])


async def test_every_spelling_of_loopback_is_refused_before_connecting() -> None:
    async with site("127.0.0.1") as target, egress_client(EgressPolicy()) as client:
        for host in (
            "localhost",
            "127.1",
            "2130706433",
            "0x7f.1",
            "0.0.0.0",
            "[::1]",
            "LOCALHOST.",
        ):
            with pytest.raises(EgressRefused, match="egress policy"):
                await client.get(f"http://{host}:{target.port}/")
        for url in ("ftp://example.org/", "file:///etc/passwd"):
            with pytest.raises(EgressRefused, match="http and https only"):
                await client.get(url)
        with pytest.raises(EgressRefused, match="metadata"):
            await client.get("http://metadata.google.internal/computeMetadata/v1")
    assert target.hosts == []


async def test_an_allowed_address_is_reached_with_its_host_header() -> None:
    policy = EgressPolicy.parse([f"{ALLOWED}/32"])
    async with site(ALLOWED) as allowed, egress_client(policy) as client:
        response = await client.get(f"http://{ALLOWED}:{allowed.port}/")
        assert response.status_code == 200 and response.text == "ok"
    assert allowed.hosts == [f"{ALLOWED}:{allowed.port}"]


async def test_the_connection_goes_to_the_address_that_was_checked() -> None:
    """DNS rebinding: the first answer (allowed) is checked, a second one would be internal.
    The connection goes to the checked address, once; the Host header keeps the name."""
    async with site(ALLOWED) as allowed, site("127.0.0.1") as target:
        answers = [[ALLOWED], ["127.0.0.1"]]
        asked: list[str] = []

        async def rebinding(host: str, port: int) -> list[str]:
            asked.append(host)
            return answers.pop(0) if len(answers) > 1 else answers[0]

        policy = EgressPolicy.parse([f"{ALLOWED}/32"], resolver=rebinding)
        async with egress_client(policy) as client:
            response = await client.get(f"http://ledger.test:{allowed.port}/")
            assert response.status_code == 200
        assert asked == ["ledger.test"]
        assert allowed.hosts == [f"ledger.test:{allowed.port}"]
        # the next connection asks again, and the internal answer is refused
        async with egress_client(policy) as client:
            with pytest.raises(EgressRefused, match="resolves to a loopback address"):
                await client.get(f"http://ledger.test:{target.port}/")
    assert target.hosts == []


async def test_a_name_with_one_internal_address_is_refused() -> None:
    async def mixed(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.5"]

    with pytest.raises(EgressRefused, match="private"):
        await EgressPolicy(resolver=mixed).addresses("mixed.example", 80)


async def test_every_redirect_hop_is_checked() -> None:
    policy = EgressPolicy.parse([f"{ALLOWED}/32"])
    async with site("127.0.0.1") as target:
        hop = (
            f"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{target.port}/\r\n"
            "content-length: 0\r\nconnection: close\r\n\r\n"
        ).encode()
        async with (
            site(ALLOWED, hop) as allowed,
            egress_client(policy, follow_redirects=True) as client,
        ):
            with pytest.raises(EgressRefused, match="loopback"):
                await client.get(f"http://{ALLOWED}:{allowed.port}/")
        assert allowed.hosts == [f"{ALLOWED}:{allowed.port}"]
    assert target.hosts == []


async def test_a_url_is_checked_as_a_record_is_saved() -> None:
    policy = EgressPolicy()
    with pytest.raises(EgressRefused) as refused:
        await policy.check_url("http://127.1:8080/v1", field="base_url")
    assert refused.value.field == "base_url"
    with pytest.raises(EgressRefused, match="http and https"):
        await policy.check_url("gopher://example.org/", field="url")
    # a name that does not resolve now is accepted (its requests are checked when made)
    await policy.check_url("http://api.invalid/v1")
    await policy.check_url("https://93.184.216.34/v1")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for the name ``ledger.test`` only (no address)."""
    if shutil.which("openssl") is None:  # pragma: no cover
        pytest.skip("needs the openssl command to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=ledger.test"),
            *("-addext", "subjectAltName=DNS:ledger.test"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_keeps_the_name_while_connecting_to_the_checked_address(
    certificate: tuple[Path, Path],
) -> None:
    """The pinned connection's TLS sends the name as its server name and checks the
    certificate for the name (a certificate for the name alone passes; the address would
    not), and a name the certificate does not cover fails the check."""
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server_names: list[str | None] = []

    def note_name(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        server_names.append(name)

    served.sni_callback = note_name

    async def resolve(host: str, port: int) -> list[str]:
        return [ALLOWED]

    policy = EgressPolicy.parse([f"{ALLOWED}/32"], resolver=resolve)
    trusted = ssl.create_default_context(cafile=str(cert))
    async with site(ALLOWED, tls=served) as allowed:
        async with egress_client(policy, verify=trusted) as client:
            response = await client.get(f"https://ledger.test:{allowed.port}/")
            assert response.status_code == 200 and response.text == "ok"
        assert server_names == ["ledger.test"]
        assert allowed.hosts == [f"ledger.test:{allowed.port}"]
        async with egress_client(policy, verify=trusted) as client:
            with pytest.raises(httpx2.ConnectError):
                await client.get(f"https://other.test:{allowed.port}/")
