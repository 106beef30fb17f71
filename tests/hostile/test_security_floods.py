"""Floods (docs/security.md, "Floods"): a WebSocket op burst throttles only its own connection; slots are
counted after auth, per token and per address; strangers holding 1,001 sockets do not make /readyz fail."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from bridge.fanout import protocol as p
from bridge.fanout.limits import ConnectionSlots, OpBucket, OpLimits
from bridge.http.app import build_app, serving
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node
from tests.support.waiting import wait_until

BURST = 5_000


def test_the_op_bucket_allows_a_burst_then_the_rate() -> None:
    t = [0.0]
    bucket = OpBucket(OpLimits(rate_per_s=10, burst=3, clock=lambda: t[0]))
    assert [bucket.take() for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.1)]
    t[0] += 0.1
    assert bucket.take() == 0.0 and bucket.take() > 0


def test_slots_are_bounded_per_token_per_address_and_in_all() -> None:
    slots = ConnectionSlots(per_token=2, per_address=3, total=4)
    assert [slots.acquire("a", "1.1.1.1") for _ in range(3)] == [None, None, "token"]
    assert slots.acquire("b", "1.1.1.1") is None and slots.acquire("c", "1.1.1.1") == "address"
    assert slots.acquire("c", "2.2.2.2") is None and slots.acquire("d", "3.3.3.3") == "total"
    slots.release("a", "1.1.1.1")
    assert slots.acquire("d", "3.3.3.3") is None and slots.open == 4


def _flood(url: str, token: str, sent: threading.Event, result: dict[str, Any]) -> None:
    """Another thread, its own loop: 5,000 pings as fast as the client can write them, then 1.5 s of reading."""

    async def run() -> None:
        async with aiohttp.ClientSession() as http, http.ws_connect(f"{url}/v1/ws?token={token}") as ws:
            await ws.receive()  # hello
            for i in range(BURST):
                await ws.send_str(json.dumps({"op": "ping", "id": i}))
            start = time.monotonic()
            sent.set()
            pongs, errors = 0, []
            while (left := 1.5 - (time.monotonic() - start)) > 0:
                try:
                    msg = await ws.receive(timeout=left)
                except TimeoutError:
                    break
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    break
                m = json.loads(msg.data)
                pongs += m["type"] == "pong"
                if m["type"] == "error":
                    errors.append(m)
            result.update(pongs=pongs, errors=errors, elapsed=time.monotonic() - start)

    asyncio.run(run())


async def test_a_5000_op_burst_throttles_that_connection_while_another_clients_ping_answers_within_100_ms(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    limits = node.service.op_limits
    other = await WsClient.connect(node.url, node.token())
    clients.append(other)
    await other.wait_for("hello")
    sent, result = threading.Event(), {}
    flooder = asyncio.create_task(asyncio.to_thread(_flood, node.url, node.token(), sent, result))
    await wait_until(sent.is_set, 30, 0.01, message="the burst written")
    latencies = []
    for i in range(10):
        start = time.monotonic()
        await other.send(op="ping", id=f"o{i}")
        await other.wait_for("pong", timeout=5, id=f"o{i}")
        latencies.append(time.monotonic() - start)
    await flooder
    print(f"\nflood: {result['pongs']} pongs of {BURST} in {result['elapsed']:.2f} s, {len(result['errors'])} error "
          f"frame(s); other client's ping: max {max(latencies) * 1000:.1f} ms")
    assert max(latencies) < 0.1, latencies
    # The flooder was told, once, and held to the burst plus the rate: far from its 5,000.
    assert [e["code"] for e in result["errors"]] == [p.ERR_RATE_LIMITED]
    ceiling = limits.burst + limits.rate_per_s * (result["elapsed"] + 1.0)
    assert limits.burst <= result["pongs"] <= ceiling < BURST, result


async def test_slots_are_counted_after_auth_per_token_and_per_address(nodes: Callable[..., Any],
                                                                      clients: list[WsClient]) -> None:
    node: Node = await nodes()
    node.service.slots = ConnectionSlots(per_token=2, per_address=3, total=10)
    for _ in range(20):  # strangers: closed 4401, never a slot
        c = await WsClient.connect(node.url, "not-a-token")
        clients.append(c)
        assert await c.wait_closed() == p.CLOSE_UNAUTHORIZED
    a = node.token()
    first = [await WsClient.connect(node.url, a) for _ in range(2)]
    clients.extend(first)
    for c in first:
        await c.wait_for("hello")
    third = await WsClient.connect(node.url, a)
    clients.append(third)
    assert await third.wait_closed() == p.CLOSE_TRY_AGAIN
    assert third.of("error")[0]["code"] == p.ERR_TOO_MANY_CONNECTIONS and "token" in third.of("error")[0]["message"]
    b = await WsClient.connect(node.url, node.token())  # another token, the third from 127.0.0.1
    clients.append(b)
    await b.wait_for("hello")
    c4 = await WsClient.connect(node.url, node.token())
    clients.append(c4)
    assert await c4.wait_closed() == p.CLOSE_TRY_AGAIN and "address" in c4.of("error")[0]["message"]
    await first[0].close()
    await wait_until(lambda: node.service.slots.open == 2, 5, 0.01, message="the closed socket's slot freed")
    again = await WsClient.connect(node.url, a)
    clients.append(again)
    await again.wait_for("hello")


@pytest.fixture
async def bridge_app(nodes: Callable[..., Any]) -> AsyncIterator[tuple[str, int]]:
    """The daemon's app (WebSocket, health) behind the daemon's runner with its default cap of 1,000."""
    node: Node = await nodes()

    async def ready() -> dict[str, Any]:
        return {"started": {"ok": True}}

    app = build_app(ready, websocket=node.service)
    async with serving(app, "127.0.0.1", 0, max_connections=1000) as runner:
        port = int(runner.addresses[0][1])
        yield f"http://127.0.0.1:{port}", port


async def test_1001_unauthenticated_connections_do_not_make_readyz_fail(bridge_app: tuple[str, int]) -> None:
    url, port = bridge_app
    held: list[asyncio.StreamWriter] = []
    try:
        for i in range(1001):
            _, w = await asyncio.open_connection("127.0.0.1", port)
            if i % 2:  # half send the start of a request and stop (slowloris), half send nothing
                w.write(b"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(w)
        async with aiohttp.ClientSession() as http:
            for path in ("/readyz", "/livez"):
                async with http.get(url + path) as r:
                    assert r.status == 200, path
            # WebSocket upgrades without a token: refused, never holding a slot
            for _ in range(20):
                async with http.ws_connect(url + "/v1/ws") as ws:
                    await ws.receive()
                    assert ws.close_code == p.CLOSE_UNAUTHORIZED
            async with http.get(url + "/readyz") as r:
                assert r.status == 200
    finally:
        for w in held:
            w.close()


