"""Many sessions' sync logs in few `POST /sync/history` calls (bridge.upstream.sync_batch), against the fake
serve and the real PostgreSQL: a catch-up of 200 sessions, the request bytes it costs, and a connection
dropped in the middle of one call."""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.writes.event_store import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower_settings import FollowerSettings
from bridge.upstream.store_sink import StoreSink
from tests.support.fake_upstream import FakeUpstream
from tests.support.metric_values import Since
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:batched"
SESSIONS = 200


async def _legacy_turn(fake: FakeUpstream, sid: str, n: int) -> None:
    """Legacy events only (never on the durable stream or /history): only the sync log has them."""
    for i in range(n):
        await fake.append_legacy(sid, "message.updated", {"info": {"id": f"msg_{sid}_{i}", "role": "user"}},
                                 live=False)


def _upstream_ids(fake: FakeUpstream, sid: str) -> list[tuple[int, str]]:
    return [(i["seq"], i["id"]) for i in fake.sessions[sid].log]


async def _catch_up(fake: FakeUpstream, store: EventStore, client: UpstreamClient, sids: list[str]) -> None:
    """A follower per session on one client until every session's stored events are its sync log."""
    claims = [await store.claim(sid, "owner-1") for sid in sids]  # a warm-up: every session claimed, then
    epochs = [epoch for epoch, _ in claims]  # followed
    tasks = [asyncio.create_task(DurableFollower(sid, client, StoreSink(store, sid, epoch), cursor, FollowerSettings(
        upstream=UPSTREAM, reconnect_min_s=0.05, reconnect_max_s=0.5)).run())
             for sid, (epoch, cursor) in zip(sids, claims, strict=True)]

    async def mirrored() -> bool:
        for sid in sids:
            if await stored_ids(store, sid) != _upstream_ids(fake, sid):
                return False
        return True

    try:
        await wait_until(mirrored, 60, 0.1, message="every session's sync log stored")
    finally:
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for sid, epoch in zip(sids, epochs, strict=True):
            await store.release(sid, epoch)


async def _sessions(fake: FakeUpstream, n_events: int) -> list[str]:
    sids = [f"ses_B{k:04d}" for k in range(SESSIONS)]
    for sid in sids:
        fake.add_session(sid)
        await _legacy_turn(fake, sid, n_events)
    return sids


async def test_200_sessions_catch_up_in_a_few_sync_calls_of_bounded_bytes(fake: FakeUpstream,
                                                                       engine: AsyncEngine) -> None:
    store = EventStore(engine, UPSTREAM)
    sids = await _sessions(fake, 3)
    asked = Since("bridge_sync_call_sessions_sum")
    async with UpstreamClient(fake.url) as client:
        await client.list_sessions()  # every session known: each body names all 200
        await _catch_up(fake, store, client, sids)  # from seq 0: the first pass
        assert fake.sync_calls <= 5, fake.sync_calls
        for sid in sids:
            await _legacy_turn(fake, sid, 2)
        calls, sent = fake.sync_calls, fake.sync_request_bytes
        await _catch_up(fake, store, client, sids)  # from the stored cursors
        assert fake.sync_calls - calls <= 5, fake.sync_calls - calls
        # One body names every known session (~35 B each): a few bodies for 400 events, not 200 of them.
        per_event = (fake.sync_request_bytes - sent) / (2 * SESSIONS)
        assert per_event <= 5 * 35 * SESSIONS / (2 * SESSIONS), per_event
        assert asked.value >= 2 * SESSIONS


async def test_a_connection_dropped_in_the_middle_of_a_call_loses_nothing(fake: FakeUpstream,
                                                                        engine: AsyncEngine) -> None:
    store = EventStore(engine, UPSTREAM)
    sids = await _sessions(fake, 2)
    async with UpstreamClient(fake.url) as client:
        await client.list_sessions()
        await _catch_up(fake, store, client, sids)
        for sid in sids:
            await _legacy_turn(fake, sid, 3)
        fake.sync_drop_next = 2  # the first two calls of the repair are cut unanswered
        calls = fake.sync_calls
        await _catch_up(fake, store, client, sids)  # stored == the sync log (checked inside)
        assert fake.sync_drop_next == 0
        assert fake.sync_calls - calls <= 10, fake.sync_calls - calls  # asked again together, not per session
    for sid in sids:
        assert await stored_ids(store, sid) == _upstream_ids(fake, sid)
