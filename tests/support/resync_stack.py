"""The fan-out on a live stream of the fake upstream, one WebSocket client subscribed to one session, for the
tests of the requests' re-sync after a live reconnect (permissions and questions, docs/upstream.md §4.4, §18):
a real PostgreSQL, the bridge's own app on a loopback port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
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
from tests.support.metric_values import Since
from tests.support.tasks import in_background
from tests.support.waiting import wait_until


async def not_ready() -> dict[str, Any]:
    return {"started": {"ok": False}}


@dataclass
class ResyncStack:
    fake: FakeUpstream
    fanout: FanoutPart
    live: LiveStream
    ws: WsClient
    url: str  # the bridge's, for more clients
    passes: Since  # bridge_request_resync_passes_total since the stack started

    async def reconnect(self) -> None:
        """End /api/event cleanly (like a legacy prompt start); wait for the reconnect and its re-sync."""
        connections, passes = self.live.connections, self.passes.value
        self.fake.drop_connections()
        await wait_until(lambda: self.live.connections > connections and self.fake.live_subscribers == 1,
                         20, 0.01, message="live stream reconnected")
        await wait_until(lambda: self.passes.value > passes, 20, 0.01, message="re-sync pass after reconnect")


@contextlib.asynccontextmanager
async def resync_stack(engine: AsyncEngine, database_url: str, fake: FakeUpstream, client: UpstreamClient,
                       sid: str, secret: str, upstream: str) -> AsyncIterator[ResyncStack]:
    """The stack, its first re-sync pass done and its client caught up on `sid` (added to the fake)."""
    fake.add_session(sid)
    settings = Settings(upstream_url=fake.url, upstream_name=upstream, auth_secret=Secret(secret))
    fanout = FanoutPart(settings, engine, database_url, secret=secret, client=client)
    server = TestServer(build_app(not_ready, websocket=fanout.service), host="127.0.0.1")
    await server.start_server()
    live = LiveStream(client, LiveDispatch(relay=fanout.relay, resync=fanout.resync), reconnect_min_s=0.01,
                      reconnect_max_s=0.05, upstream=upstream)
    passes = Since("bridge_request_resync_passes_total")
    try:
        async with in_background(live.run()), in_background(fanout.run()):
            url = str(server.make_url("")).rstrip("/")
            ws = await WsClient.connect(url, mint_token(secret, upstream))
            try:
                await wait_until(lambda: passes.value >= 1, 20, 0.01, message="first connect re-synced")
                await ws.subscribe(sid)
                await ws.wait_for("caught_up")
                yield ResyncStack(fake, fanout, live, ws, url, passes)
            finally:
                await ws.close()
    finally:
        await server.close()
