"""Which `Host` headers the bridge believes (DNS rebinding), and which bind addresses are loopback. Pure.

A page on `http://evil.example:8765` whose name is made to resolve to 127.0.0.1 reaches the bridge with
`Host: evil.example:8765` and `Origin: http://evil.example:8765`: comparing the two proves nothing, since
the browser sets both from the attacker's name. So the `Host` itself must be one the operator meant:
a loopback name or address, `BRIDGE_HTTP_HOST`, or the host of an origin in `BRIDGE_ALLOWED_ORIGINS`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
LOOPBACK_TRUSTED = LOOPBACK_NAMES | {"127.0.0.1", "::1"}


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or a loopback name."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def hostname_of(host_header: str | None) -> str | None:
    """The name part of a `Host` header (`[::1]:8765` → `::1`), lower-case; None if it does not parse."""
    if not host_header:
        return None
    try:
        parts = urlsplit("//" + host_header)
        name = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return None
    return name.lower() if name else None


def trusted_hosts(http_host: str, allowed_origins: Iterable[str]) -> frozenset[str]:
    """Host names a request may carry: loopback, the bind address (unless a wildcard), allowed origins."""
    names = set(LOOPBACK_TRUSTED)
    if http_host.strip().lower() not in _WILDCARDS:
        names.add(http_host.strip().strip("[]").lower())
    for origin in allowed_origins:
        name = urlsplit(origin).hostname
        if name:
            names.add(name.lower())
    return frozenset(names)


def host_trusted(host_header: str | None, trusted: frozenset[str]) -> bool:
    name = hostname_of(host_header)
    return name is not None and (name in trusted or is_loopback_host(name))
