"""Quiet when waiting: the /api/event reader retrying an upstream that refuses logs the outage once when
lost and once when back, not at every retry; the bridge's readiness shows why meanwhile."""

from __future__ import annotations

import asyncio
import contextlib

from structlog.testing import capture_logs

from bridge.events import ChatEvent
from bridge.upstream.client import UpstreamClient
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until


class Quiet:
    async def on_live_connected(self) -> None:
        pass

    async def on_live_event(self, ev: ChatEvent) -> None:
        pass


async def test_a_run_of_refused_reconnects_logs_one_lost_and_one_back(fake: FakeUpstream) -> None:
    fake.fail_status["live"] = 503
    with capture_logs() as logs:
        async with UpstreamClient(fake.url) as client:
            live = LiveStream(client, Quiet(), reconnect_min_s=0.01, reconnect_max_s=0.02)
            task = asyncio.create_task(live.run())
            try:
                await wait_until(lambda: live.outage.retries >= 8, timeout=10, message="not retrying")
                status = live.outage.status()
                assert status["retries"] >= 8 and "503" in status["error"]  # what /readyz shows
                assert not live.connected.is_set()
                del fake.fail_status["live"]
                await wait_until(live.connected.is_set, timeout=10, message="never reconnected")
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    outage = [e for e in logs if e["event"].startswith("dependency_") or e["event"] == "live_stream_error"]
    assert [e["event"] for e in outage] == ["dependency_lost", "dependency_back"]
    assert outage[0]["dependency"] == "upstream_live" and "503" in outage[0]["error"]
    assert outage[1]["retries"] >= 8
    assert live.outage.status() == {}
