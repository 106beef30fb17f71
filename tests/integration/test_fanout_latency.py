"""Fan-out latency of deltas through the real path: a (fake) upstream writes a delta on `/api/event` →
the bridge's LiveStream reads and parses it → relay → hub → client queue → `/v1/ws` → the client's socket.

Part of `make bench` (prints p50/p99; BENCHMARKS.md). As a test it pins only what does not depend on
the machine's speed: every delta arrives, once, in the order the upstream wrote them."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

from aiohttp.test_utils import TestServer
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.config import Secret, Settings
from bridge.dispatch import LiveDispatch
from bridge.fanout.service import FanoutPart
from bridge.http.app import build_app
from bridge.upstream.client import UpstreamClient
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import FakeUpstream
from tests.support.fanout_client import WsClient
from tests.support.waiting import wait_until

SID = "ses_latency"
SECRET = "l" * 48
UPSTREAM = "it-upstream"


async def not_ready() -> dict[str, Any]:
    return {"started": {"ok": False}}


async def test_delta_latency_from_upstream_write_to_client_receipt(engine: AsyncEngine, database_url: str) -> None:
    fake = FakeUpstream()
    await fake.start()
    settings = Settings(upstream_url=fake.url, upstream_name=UPSTREAM, auth_secret=Secret(SECRET))
    fanout = FanoutPart(settings, engine, database_url, secret=SECRET)
    server = TestServer(build_app(not_ready, websocket=fanout.service), host="127.0.0.1")
    await server.start_server()
    received: dict[str, float] = {}
    order: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    ws: WsClient | None = None
    try:
        async with UpstreamClient(fake.url) as client:
            live = LiveStream(client, LiveDispatch(relay=fanout.relay, resync=fanout.resync), upstream=UPSTREAM)
            tasks += [asyncio.create_task(live.run()), asyncio.create_task(fanout.run())]
            ws = await WsClient.connect(str(server.make_url("")).rstrip("/"), mint_token(SECRET, UPSTREAM), read=False)
            await wait_until(live.connected.is_set, 20, 0.02, message="live stream connected")
            await ws.subscribe(SID)
            client_ws = ws.ws

            async def read() -> None:
                async for msg in client_ws:
                    if '"delta"' in msg.data:
                        received[msg.json()["delta"]] = time.perf_counter()
                        order.append(msg.json()["delta"])

            tasks.append(asyncio.create_task(read()))
            await wait_until(lambda: fanout.hub.published_seq(SID) is not None, 20, 0.02, message="live")
            n = 400
            sent: dict[str, float] = {}
            for i in range(n):
                text = f"d{i}"
                sent[text] = time.perf_counter()
                fake.publish_live({"id": f"evt_d{i}", "type": "session.next.text.delta", "location": {"directory": "/"},
                                   "data": {"timestamp": 0, "sessionID": SID, "assistantMessageID": "msg_m",
                                            "textID": "text-0", "delta": text}})
                await asyncio.sleep(0.002)  # a token stream's pace (a rate, not a wait for a condition)
            await wait_until(lambda: len(received) == n, 30, 0.02, message="every delta received")
        lat = sorted((received[k] - sent[k]) * 1000 for k in sent)
        p50, p99 = statistics.median(lat), lat[int(0.99 * (n - 1))]
        print(f"\ndelta fan-out latency over {n} deltas (upstream write → client receipt): "
              f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {lat[-1]:.2f} ms")
        assert order == [f"d{i}" for i in range(n)]
    finally:
        if ws is not None:
            await ws.close()
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await server.close()
        await fake.stop()
