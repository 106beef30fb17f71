"""Asks a serve which OpenCode generation it is: the routes of `bridge.upstream.generation` requested
through the client's own transport (same credentials, same errors), each answer read up to a small bound
and classified there."""

from __future__ import annotations

import asyncio

from bridge.errors import UpstreamError
from bridge.upstream.generation import PROBE_ROUTES, Probe, Recognition, classify
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.responses import decode_json, read_bounded

PROBE_BODY_BYTES = 64 * 1024  # a version answer is tiny; 1.x answers /api/info with a ~3 KB HTML page
PROBE_TIMEOUT_S = 3.0


async def probe(client: UpstreamHttp, route: str, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """One route's answer; a transport failure or timeout is "no answer" (`status` None)."""
    try:
        async with asyncio.timeout(timeout_s):
            request = client._request("GET", route, None, stream=False)
            async with client.transport.send(request) as resp:
                content_type = resp.headers.get("Content-Type", "").lower()
                is_json = "json" in content_type
                if resp.status != 200 or not is_json:
                    return Probe(route, resp.status, is_json)
                body = decode_json(await read_bounded(resp, PROBE_BODY_BYTES, f"GET {route}"))
                return Probe(route, resp.status, body is not None, body)
    except (UpstreamError, TimeoutError):
        return Probe(route, None)


async def recognize(client: UpstreamHttp, timeout_s: float = PROBE_TIMEOUT_S) -> Recognition:
    """The serve's generation from its answers to PROBE_ROUTES (asked at once)."""
    probes = await asyncio.gather(*(probe(client, route, timeout_s) for route in PROBE_ROUTES))
    return classify(list(probes))
