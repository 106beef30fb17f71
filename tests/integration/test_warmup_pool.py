"""A warm-up of many sessions at once stays within the write pool (bridge.sessions.session_run,
`SESSION_DB_AT_ONCE`; bridge.sessions.claim_batch): against the daemon's write pool (5 + 10 overflow) made
to fail an acquire after 0.5 s instead of 30, 300 sessions warmed in the same instant are claimed in a few
transactions and all mirrored, and no follower crashes on a pool timeout (without the gate they did)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bridge import metrics
from bridge.config import Settings
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.db import to_async_url
from bridge.store.writes.event_store import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.metric_values import sample
from tests.support.waiting import wait_until

UPSTREAM = "fake:warmup"
SESSIONS = 300
SETTINGS = Settings(upstream_name=UPSTREAM, reconnect_min_s=0.05, reconnect_max_s=0.5, lease_ttl_s=30.0,
                    heartbeat_interval_s=5.0, sweep_interval_s=5.0, idle_ttl_s=3600.0, active_poll_s=1.0,
                    active_poll_idle_s=5.0)


@pytest_asyncio.fixture
async def small_pool(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_async_engine(to_async_url(database_url), pool_size=5, max_overflow=10, pool_timeout=0.5)
    try:
        yield eng
    finally:
        await eng.dispose()


async def test_300_sessions_warmed_at_once_queue_within_a_small_pool(fake: FakeUpstream, small_pool: AsyncEngine,
                                                                     engine: AsyncEngine) -> None:
    sids = [f"ses_W{k:04d}" for k in range(SESSIONS)]
    for sid in sids:
        fake.add_session(sid)
        await fake.append_legacy(sid, "message.updated", {"info": {"id": f"msg_{sid}", "role": "user"}}, live=False)
    crashes = metrics.FOLLOWER_CRASHES._value.get()
    batches = sample("bridge_claim_batches_total")
    store = EventStore(small_pool, UPSTREAM)
    async with UpstreamClient(fake.url) as client:
        sup = FollowerSupervisor(store, client, replace(SETTINGS), "owner-1")
        async with store.group_commit(), sup.started():  # as in the daemon: writes through the committer
            for sid in sids:  # all in the same instant, as discovery or a reconnect storm warms them
                sup.warm(sid, reason="listed")
            check = EventStore(engine, UPSTREAM)

            async def mirrored() -> bool:
                stored = await check.sessions()
                return sum(1 for r in stored if r.cursor_seq >= 1) == SESSIONS

            await wait_until(mirrored, 120, 0.2, message="every session claimed and its sync log stored")
            assert all(sup.owns(sid) for sid in sids)
    # 300 claims asked in one turn of the loop: batches of at most 200 (not one transaction per session)
    assert 2 <= sample("bridge_claim_batches_total") - batches <= 4
    assert metrics.FOLLOWER_CRASHES._value.get() == crashes
