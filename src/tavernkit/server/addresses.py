"""Client addresses as the server's per-address limits count them (the login limits, the
connection cap): an IPv4 address is itself, an IPv4-mapped IPv6 address (``::ffff:a.b.c.d``,
from a dual-stack socket) is its IPv4 address, and an IPv6 address is its /64, the block one
subscriber line gets, so a client cannot take a fresh address per attempt."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["UNKNOWN_ADDRESS", "TrustedAddresses", "address_key"]

#: the key of a client whose address is unknown (a Unix socket, a test's transport)
UNKNOWN_ADDRESS = "unknown"


@lru_cache(maxsize=4096)
def address_key(host: str | None) -> str:
    """The key the per-address limits count ``host`` under (see the module docstring)."""
    if not host:
        return UNKNOWN_ADDRESS
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return host  # a name, as a proxy may forward: counted as it is
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class TrustedAddresses:
    """The addresses uvicorn takes forwarded headers from (``forwarded_allow_ips``: literal
    addresses or networks, ``*`` for any): a reverse proxy's connections carry many clients,
    so the per-address connection cap leaves them alone. Entries that are neither (a Unix
    socket's path) are ignored."""

    def __init__(self, entries: Iterable[str] | str = ()) -> None:
        items = entries.split(",") if isinstance(entries, str) else list(entries)
        self.any = False
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in (e.strip() for e in items):
            if entry == "*":
                self.any = True
            elif entry:
                try:
                    self._networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    continue

    def __contains__(self, host: object) -> bool:
        if self.any:
            return True
        if not isinstance(host, str):
            return False
        try:
            address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
        except ValueError:
            return False
        return any(address in network for network in self._networks)
