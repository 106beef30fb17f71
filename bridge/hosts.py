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


def trusted_hosts(http_host: str, allowed_origins: Iterable[str], allowed_hosts: Iterable[str] = ()
                  ) -> frozenset[str]:
    """Host names a request may carry: loopback, the bind address (unless a wildcard), allowed origins'
    hosts and BRIDGE_ALLOWED_HOSTS."""
    names = set(LOOPBACK_TRUSTED) | {h.strip().strip("[]").lower() for h in allowed_hosts if h.strip()}
    if http_host.strip().lower() not in _WILDCARDS:
        names.add(http_host.strip().strip("[]").lower())
    for origin in allowed_origins:
        name = urlsplit(origin).hostname
        if name:
            names.add(name.lower())
    return frozenset(names)


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def host_trusted(host_header: str | None, trusted: frozenset[str]) -> bool:
    """A trusted name, or an IP literal: rebinding needs a name the attacker controls, and a page whose
    origin is the bridge's own address is the bridge's own page (probes and scrapers by address pass)."""
    name = hostname_of(host_header)
    return name is not None and (name in trusted or is_ip_literal(name))


def origin_allowed(origin: str | None, host: str | None, allowed: frozenset[str],
                   trusted: frozenset[str] = LOOPBACK_TRUSTED) -> bool:
    """No Origin: not a browser (a browser sends it on a WebSocket and on every POST). Same origin: the
    built-in viewer, but only under a `Host` the operator meant (a rebound name proves nothing). Anything
    else only if listed in BRIDGE_ALLOWED_ORIGINS (`*` allows every origin)."""
    if origin is None:
        return True
    if "*" in allowed or origin.rstrip("/") in allowed:
        return True
    return bool(host) and urlsplit(origin).netloc == host and host_trusted(host, trusted)
