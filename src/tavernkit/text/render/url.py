"""``{{url::METHOD::URL::BODY::TIMEOUT}}``: an HTTP request from inside a template.

A template that can fetch URLs is a server-side request forgery hole (a shared card could
read the cloud metadata service or a router's admin page), so the function exists only when a
renderer is built with ``UrlPolicy(enabled=True)``, and then:

- only ``http``/``https`` URLs whose host is on ``allowed_hosts`` (exact names, ``*.domain``
  for subdomains, ``*`` for any public host);
- the host is resolved once and every address must be public, as the server's egress policy
  judges addresses (:func:`tavernkit.egress.address_refusal`: not private, loopback,
  link-local, reserved, multicast, unspecified or a cloud metadata address, IPv4 inside IPv6
  included) unless ``allow_private``; the request then goes to the checked address (Host
  header and TLS server name kept), so a second DNS answer cannot swap in an internal address;
- redirects are followed by hand, each target checked the same way, at most ``max_redirects``;
- the timeout is the template's (seconds), capped by ``max_timeout_s``; the body read stops at
  ``max_response_bytes`` (the text is cut there);
- environment proxies are ignored (a proxy would resolve the name itself).

The result is the response body as text. A refused or failed request raises, so the macro is
left as written and the render records a warning naming the reason.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2

from tavernkit.egress import address_refusal
from tavernkit.errors import UrlRefused as UrlRefused
from tavernkit.log_redaction import install as install_log_redaction
from tavernkit.text.macros.registry import MacroRuntimeError

# renderer-only use still gets no URL query or header in httpx2's DEBUG lines
install_log_redaction("httpx2", "httpcore2")

__all__ = ["UrlPolicy", "UrlRefused", "fetch_url", "url_provider"]

_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    enabled: bool = False
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    allow_private: bool = False
    default_timeout_s: float = 10.0
    max_timeout_s: float = 30.0
    max_response_bytes: int = 1_000_000
    max_redirects: int = 5
    methods: frozenset[str] = _METHODS

    def __post_init__(self) -> None:
        hosts = frozenset(h.strip().lower().rstrip(".") for h in self.allowed_hosts)
        object.__setattr__(self, "allowed_hosts", hosts)

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if "*" in self.allowed_hosts or host in self.allowed_hosts:
            return True
        return any(
            pattern.startswith("*.") and host.endswith(pattern[1:])
            for pattern in self.allowed_hosts
        )

    def address_allowed(self, address: str) -> bool:
        return self.allow_private or address_refusal(address) is None


async def _resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UrlRefused(f"cannot resolve {host!r}: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def _checked_target(policy: UrlPolicy, url: httpx2.URL) -> str:
    """The address to connect to for ``url``, after every policy check."""
    if url.scheme not in ("http", "https"):
        raise UrlRefused(f"scheme {url.scheme!r} is not allowed (http and https only)")
    host = url.host
    if not host:
        raise UrlRefused("URL has no host")
    if not policy.host_allowed(host):
        raise UrlRefused(f"host {host!r} is not on the allow-list")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        addresses = await _resolve(host, port)
    if not addresses:
        raise UrlRefused(f"host {host!r} has no address")
    for address in addresses:
        reason = None if policy.allow_private else address_refusal(address)
        if reason is not None:
            raise UrlRefused(f"host {host!r} resolves to {address}, {reason}")
    return addresses[0]


async def fetch_url(
    policy: UrlPolicy,
    method: str,
    url: str,
    body: str | None = None,
    timeout_s: float | None = None,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> str:
    """Perform one request under ``policy`` and return the (capped) body as text."""
    if not policy.enabled:
        raise UrlRefused("the url function is disabled")
    verb = method.strip().upper() or "GET"
    if verb not in policy.methods:
        raise UrlRefused(f"method {verb!r} is not allowed")
    timeout = policy.default_timeout_s if timeout_s is None else timeout_s
    timeout = max(0.001, min(timeout, policy.max_timeout_s))
    try:
        current = httpx2.URL(url.strip())
    except Exception as exc:  # httpx2 raises several types for a malformed URL
        raise UrlRefused(f"invalid URL {url!r}: {exc}") from exc
    content = body.encode("utf-8") if body else None
    async with httpx2.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=timeout, transport=transport
    ) as client:
        try:
            async with asyncio.timeout(timeout):
                for _ in range(policy.max_redirects + 1):
                    address = await _checked_target(policy, current)
                    pinned = current.copy_with(host=address)
                    # identity: a compressed body could inflate far past the size cap in
                    # one decoded chunk before the cap is checked.
                    headers = {
                        "Host": current.netloc.decode("ascii"),
                        "Accept-Encoding": "identity",
                    }
                    extensions = {"sni_hostname": current.host} if current.scheme == "https" else {}
                    request = client.build_request(
                        verb, pinned, headers=headers, content=content, extensions=extensions
                    )
                    response = await client.send(request, stream=True)
                    try:
                        location = response.headers.get("location")
                        if response.status_code in _REDIRECTS and location:
                            current = current.join(location)
                            if response.status_code in (301, 302, 303) and verb not in (
                                "GET",
                                "HEAD",
                            ):
                                verb, content = "GET", None
                            continue
                        return await _read_capped(response, policy.max_response_bytes)
                    finally:
                        await response.aclose()
                raise UrlRefused(f"more than {policy.max_redirects} redirects")
        except TimeoutError as exc:
            raise MacroRuntimeError(f"request timed out after {timeout:g} s") from exc
        except httpx2.HTTPError as exc:
            raise MacroRuntimeError(f"request failed: {type(exc).__name__}: {exc}") from exc


async def _read_capped(response: httpx2.Response, limit: int) -> str:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    data = b"".join(chunks)[:limit]
    encoding = response.charset_encoding or "utf-8"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def url_provider(
    policy: UrlPolicy, *, transport: httpx2.AsyncBaseTransport | None = None
) -> Callable[[list[str], Mapping[str, Any], Mapping[str, Any]], Any]:
    """The ``url`` function provider: ``url(METHOD, URL, BODY?, TIMEOUT_SECONDS?)``."""

    async def url(args: list[str], _variables: Mapping[str, Any], _cfg: Mapping[str, Any]) -> str:
        if len(args) < 2:
            raise MacroRuntimeError("needs METHOD::URL[::BODY[::TIMEOUT]]")
        method, target = args[0], args[1]
        body = args[2] if len(args) > 2 and args[2] else None
        timeout: float | None = None
        if len(args) > 3 and args[3].strip():
            try:
                timeout = float(args[3])
            except ValueError as exc:
                raise MacroRuntimeError(
                    f"timeout must be a number of seconds: {args[3]!r}"
                ) from exc
            if timeout != timeout or timeout <= 0:
                raise MacroRuntimeError(f"timeout must be positive: {args[3]!r}")
        return await fetch_url(policy, method, target, body, timeout, transport=transport)

    return url
