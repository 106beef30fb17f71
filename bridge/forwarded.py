"""The client's address behind reverse proxies, pure (docs/security.md, "Behind a reverse proxy").

`BRIDGE_TRUSTED_PROXIES` lists the addresses and networks of the proxies in front of the bridge (as
uvicorn's `--forwarded-allow-ips`). A request whose peer is one of them is believed about who it came
from: the `X-Forwarded-For` chain (else the `for=` of `Forwarded`, RFC 7239) is walked from the right, each
hop trusted in turn, and the first address that is not a trusted proxy is the client. A request from any
other peer is the peer, whatever its headers say (anybody can send them), and a hop that is not an IP
address (`unknown`, an obfuscated `_hidden`, garbage) ends the walk at the last address that was one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOPS = 32  # a longer chain is cut: the walk never reads more than this many hops


def parse_trusted(raw: str) -> tuple[Network, ...]:
    """`BRIDGE_TRUSTED_PROXIES`: comma-separated addresses or CIDRs; ValueError naming the bad entry."""
    nets = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8, ::1)") from None
    return tuple(nets)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    t = text.strip().strip('"')
    if t.startswith("["):  # Forwarded: "[2001:db8::1]:4711"
        t = t[1:t.find("]")] if "]" in t else ""
    elif t.count(":") == 1:  # 192.0.2.1:4711
        t = t.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(t)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def forwarded_hops(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[str]:
    """The chain of addresses a request names, client first: `X-Forwarded-For` (every such header, in
    order), else the `for=` parameters of `Forwarded`."""
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    xff = [v for k, v in items if k.lower() == "x-forwarded-for"]
    if xff:
        return [h.strip() for v in xff for h in v.split(",")]
    hops = []
    for k, v in items:
        if k.lower() != "forwarded":
            continue
        for element in v.split(","):
            for pair in element.split(";"):
                name, _, value = pair.strip().partition("=")
                if name.strip().lower() == "for":
                    hops.append(value.strip())
    return hops


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, nets: Sequence[Network]) -> bool:
    return ip is not None and any(ip.version == n.version and ip in n for n in nets)


def client_address(peer: str | None, hops: Sequence[str], trusted: Sequence[Network]) -> str | None:
    """The client's address: `peer` unless it is a trusted proxy, then the first untrusted hop from the
    right (see the module docstring)."""
    address = peer
    current = _ip(peer) if peer is not None else None
    for hop in list(reversed(hops))[:MAX_HOPS]:
        if not _trusted(current, trusted):
            break
        ip = _ip(hop)
        if ip is None:
            break
        address, current = str(ip), ip
    return address
