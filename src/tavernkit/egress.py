"""The egress policy: where the server may send a request on a user's behalf.

With accounts on, a user's profile, custom endpoint, memory embedder or MCP server makes the
server send requests, with a bearer the user chose, to a URL the user chose. Without a policy
that is a server-side request forgery hole: ``http://127.0.0.1:6379``, a router's admin page,
the cloud metadata service at ``169.254.169.254``, all reached from inside the network. So every
request made for a non-admin goes through one :class:`EgressPolicy`:

- only ``http`` and ``https`` (:class:`EgressTransport` refuses any other scheme);
- the host is resolved, and every address it resolves to must be public: loopback, private,
  link-local, multicast, unspecified, reserved and the cloud metadata addresses
  (:data:`METADATA_ADDRESSES`; names in :data:`METADATA_NAMES`) are refused, an IPv4 address
  inside an IPv6 one (``::ffff:127.0.0.1``, 6to4, NAT64) judged as that IPv4 address. However
  a host is spelled (``127.1``, ``2130706433``, ``0x7f.1``, ``[::1]``, ``localhost.``), it is
  the resolver's answer that is judged;
- unless an admin allow-listed it (:meth:`EgressPolicy.parse`: CIDR networks, host names,
  ``*.domain``): an allowed name may resolve anywhere, an allowed network admits its
  addresses;
- the connection goes to an address that was checked: :class:`EgressBackend` is the
  ``httpcore2`` network backend that resolves, checks and connects to the checked address
  itself, so no second DNS answer comes between the check and the connect (DNS rebinding),
  while the URL, the ``Host`` header and TLS's server name and certificate check keep the name;
- every redirect hop is a new request through the same transport, so it is checked again;
- environment proxies are not used (a proxy would resolve the name itself).

A refusal is :class:`~tavernkit.errors.EgressRefused` (HTTP 403 on the server), naming the
policy and the kind of address (never the address a name resolved to). Records are checked
when they are saved (:meth:`EgressPolicy.check_url`) and every request when it is made (DNS
can change). Local mode (accounts off) and admins' own requests use no policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpcore2
import httpx2

from tavernkit.errors import EgressRefused

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_NAMES",
    "EgressBackend",
    "EgressPolicy",
    "EgressTransport",
    "address_refusal",
    "egress_client",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: the clouds' instance metadata services (AWS IPv4 and IPv6, AWS ECS, Alibaba, Azure's
#: wireserver, Oracle): refused even where the address is otherwise public
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "fd00:ec2::254",
        "169.254.170.2",
        "100.100.100.200",
        "168.63.129.16",
        "192.0.0.192",
    )
)

#: the names the clouds give their metadata services (refused before they are resolved)
METADATA_NAMES: frozenset[str] = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
_HOST_PATTERN = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")

#: ``resolve(host, port)``: the addresses of ``host`` (a test gives its own; the default asks
#: the system's resolver through the event loop)
Resolver = Callable[[str, int], Awaitable[list[str]]]


def _ip(address: str | IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return address
    return ipaddress.ip_address(address.strip("[]").split("%", 1)[0])


def _embedded(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one reaches (mapped, 6to4, NAT64), else ``ip`` itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def address_refusal(address: str | IPAddress) -> str | None:
    """Why the policy refuses ``address`` (``"a loopback address"``...), ``None`` for a public
    one. Allow-lists are not consulted here (:meth:`EgressPolicy.refusal` does)."""
    ip = _ip(address)
    for candidate in dict.fromkeys((_embedded(ip), ip)):
        if candidate in METADATA_ADDRESSES:
            return "a cloud metadata address"
        if candidate.is_unspecified:
            return "an unspecified address"
        if candidate.is_loopback:
            return "a loopback address"
        if candidate.is_link_local:
            return "a link-local address"
        if candidate.is_multicast:
            return "a multicast address"
        if candidate.is_private:
            return "a private address"
        if not candidate.is_global:
            return "a reserved address"
    return None


def _name(host: str) -> str:
    return host.strip().strip("[]").lower().rstrip(".")


async def _system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """What a policed request may reach (see the module docstring). ``networks`` and
    ``hosts`` are the admin's allow-list; ``resolver`` stands in for DNS in tests."""

    networks: tuple[IPNetwork, ...] = ()
    #: allowed host names, lower case without a trailing dot; ``*.example.com`` for the
    #: names under ``example.com``
    hosts: frozenset[str] = frozenset()
    resolver: Resolver | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, entries: Iterable[str], *, resolver: Resolver | None = None) -> EgressPolicy:
        """A policy allowing ``entries``: each a CIDR network (``10.0.0.0/8``, ``::1/128``),
        an address (its own network) or a host name (``ollama.lan``, ``*.corp.example``).
        Raises ``ValueError`` naming an entry that is none of these."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in entries:
            text = entry.strip()
            try:
                networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _name(text)
            if not name or not _HOST_PATTERN.match(name):
                raise ValueError(f"{entry!r} is neither a CIDR network nor a host name")
            hosts.add(name)
        return cls(tuple(dict.fromkeys(networks)), frozenset(hosts), resolver)

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` is allow-listed by name."""
        name = _name(host)
        if name in self.hosts:
            return True
        return any(p.startswith("*.") and name.endswith(p[1:]) for p in self.hosts)

    def refusal(self, address: str | IPAddress) -> str | None:
        """Why ``address`` is refused, ``None`` when it is public or allow-listed."""
        ip = _ip(address)
        for candidate in dict.fromkeys((_embedded(ip), ip)):
            if any(candidate in network for network in self.networks):
                return None
        return address_refusal(ip)

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses a request to ``host`` may connect to, in the resolver's order; raises
        :class:`~tavernkit.errors.EgressRefused` when any of them is refused (a name with one
        internal address among public ones is not a public name), ``OSError`` when ``host``
        cannot be resolved."""
        name = _name(host)
        try:
            literal: IPAddress | None = ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            literal = None
        if literal is not None:
            reason = self.refusal(literal)
            if reason is not None:
                raise _refused(host, f"is {reason}")
            return [str(literal)]
        allowed = self.allows_host(name)
        if not allowed and name in METADATA_NAMES:
            raise _refused(host, "is a cloud metadata name")
        found = await (self.resolver or _system_resolve)(name, port)
        found = list(dict.fromkeys(found))
        if not found:
            raise OSError(f"{host!r} has no address")
        if not allowed:
            for address in found:
                reason = self.refusal(address)
                if reason is not None:
                    raise _refused(host, f"resolves to {reason}")
        return found

    async def check_url(self, url: str, *, field: str | None = None) -> None:
        """Refuse ``url`` now when the policy would refuse its request (a record's URL as it
        is saved): a scheme other than http(s), a host that is or resolves to a refused
        address. A name that does not resolve now is accepted: its requests are checked when
        they are made. ``field`` names the setting in the error."""
        try:
            parsed = httpx2.URL(url.strip())
        except (httpx2.InvalidURL, TypeError, UnicodeError):
            return  # not a URL: the record's own validation says what is wrong with it
        if parsed.scheme not in ("http", "https"):
            raise EgressRefused(
                f"the server's egress policy allows http and https URLs only, not "
                f"{parsed.scheme or 'a URL without a scheme'}",
                field=field,
            )
        if not parsed.host:
            return
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            async with asyncio.timeout(_SAVE_RESOLVE_S):
                await self.addresses(parsed.host, port)
        except EgressRefused as exc:
            exc.field = field
            raise
        except (OSError, TimeoutError, UnicodeError):
            return


#: how long a save waits for DNS before it accepts a name unchecked (its requests are checked)
_SAVE_RESOLVE_S = 5.0


def _refused(host: str, why: str) -> EgressRefused:
    return EgressRefused(
        f"the server's egress policy refuses {host!r}: it {why} "
        "(an admin may allow it with --allow-egress)"
    )


class EgressBackend(httpcore2.AsyncNetworkBackend):
    """An ``httpcore2`` network backend that connects only where ``policy`` allows: it
    resolves the host itself, checks every address, and connects ``inner`` (the default:
    ``httpcore2``'s anyio backend) to a checked address, trying them in order. TLS is started
    by the connection with the request's host name, so the certificate is checked for it."""

    def __init__(
        self, policy: EgressPolicy, inner: httpcore2.AsyncNetworkBackend | None = None
    ) -> None:
        self.policy = policy
        self._inner = inner if inner is not None else httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            async with asyncio.timeout_at(deadline):
                addresses = await self.policy.addresses(host, port)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from None
        failure: Exception | None = None
        for address in addresses:
            left = None if deadline is None else max(deadline - loop.time(), 0.0)
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=left,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore2.ConnectTimeout:
                raise
            except httpcore2.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise EgressRefused("the server's egress policy refuses unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


#: httpcore2's errors as httpx2's (most specific first), as httpx2's own transport maps them
_ERRORS: tuple[tuple[type[Exception], type[httpx2.HTTPError]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.NetworkError, httpx2.NetworkError),
    (httpcore2.ProxyError, httpx2.ProxyError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
    (httpcore2.ProtocolError, httpx2.ProtocolError),
)


@contextlib.contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


class _ResponseStream(httpx2.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


#: httpx2's own default limits, for a transport made without any
_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)


class EgressTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport whose requests go only where ``policy`` allows: http(s) URLs,
    on an ``httpcore2`` connection pool whose connections :class:`EgressBackend` opens. Each
    request (each redirect hop a client follows included) passes here."""

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        verify: ssl.SSLContext | None = None,
        limits: httpx2.Limits = _LIMITS,
        backend: httpcore2.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self._connections = httpcore2.AsyncConnectionPool(
            ssl_context=verify if verify is not None else httpx2.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=EgressBackend(policy, backend),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise EgressRefused(
                "the server's egress policy allows http and https only, not "
                + (repr(url.scheme) if url.scheme else "this URL")
            )
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        core = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _mapped():
            response = await self._connections.handle_async_request(core)
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._connections.aclose()


def egress_client(
    policy: EgressPolicy | None,
    *,
    verify: ssl.SSLContext | None = None,
    limits: httpx2.Limits = _LIMITS,
    backend: httpcore2.AsyncNetworkBackend | None = None,
    **options: Any,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose requests ``policy`` polices (no environment proxies);
    with ``policy`` ``None``, a plain client (``options`` go to the client either way)."""
    if policy is None:
        return httpx2.AsyncClient(**options)
    transport = EgressTransport(policy, verify=verify, limits=limits, backend=backend)
    return httpx2.AsyncClient(transport=transport, trust_env=False, **options)
