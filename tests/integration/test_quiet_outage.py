"""Quiet when waiting: the /api/event reader retrying an upstream that refuses, and lease heartbeats
failing against an unreachable database, log the outage once when lost and once when back, not at every
retry; what /readyz shows meanwhile says why."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from bridge.config import Settings
from bridge.events import ChatEvent
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.chat_sessions import LeaseStore
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until


class Quiet:
    async def on_live_connected(self) -> None:
        pass

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None:
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


class FlakyLeases:
    """The real LeaseStore, with heartbeats refused while `down` (the database unreachable)."""

    def __init__(self, real: LeaseStore) -> None:
        self.real, self.down, self.refused = real, True, 0

    async def heartbeat(self, *args: Any, **kw: Any) -> Any:
        if self.down:
            self.refused += 1
            raise ConnectionRefusedError("connection refused (database restarting)")
        return await self.real.heartbeat(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


async def test_failed_lease_heartbeats_log_the_database_lost_once_and_back_once(
    engine: AsyncEngine, fake_client: UpstreamClient
) -> None:
    settings = Settings(upstream_name="fake:1", lease_ttl_s=1.0, heartbeat_interval_s=0.02, sweep_interval_s=0.2)
    leases = FlakyLeases(LeaseStore(engine, "fake:1"))
    with capture_logs() as logs:
        sup = FollowerSupervisor(EventStore(engine, "fake:1"), fake_client, settings, "host:1:quiet",
                                 leases=cast(LeaseStore, leases))
        task = asyncio.create_task(sup.run())
        try:
            await wait_until(lambda: leases.refused >= 10, 10, 0.01, message="heartbeats not retried")
            assert sup.database_outage.lost and "refused" in sup.database_outage.status()["error"]
            leases.down = False
            await wait_until(lambda: not sup.database_outage.lost, 10, 0.01, message="never back")
        finally:
            sup.stop()
            await asyncio.wait_for(task, 15)
    outage = [e for e in logs if e["event"].startswith("dependency_") or e["event"] == "lease_heartbeat_failed"]
    assert [(e["event"], e["dependency"]) for e in outage] == [("dependency_lost", "database"),
                                                               ("dependency_back", "database")]
    assert outage[1]["retries"] >= 10
