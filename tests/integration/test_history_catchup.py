"""The pipelined `/history` catch-up (bridge.upstream.catchup, docs/mirror.md "Catch-up") against the fake
upstream and a real PostgreSQL.

The sync log of these sessions is over the client's body bound, so it is not read and every event comes
from `/history` pages of 100 (the case of a long session). Each page's write waits until the fake upstream
received the request for the next page: the test hangs (times out) unless page n+1 is fetched while page
n is written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.events import ChatEvent
from bridge.store.writes import EventStore
from bridge.upstream.client import ClientLimits, UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerSettings
from bridge.upstream.store_sink import StoreSink
from bridge.upstream.sync_batch import BatchSettings
from tests.support.fake_upstream import FakeUpstream
from tests.support.metric_values import Since
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:catchup"
SID = "ses_LONG"
EVENTS = 2000
PAGE = 100
BODY_BOUND = 200_000  # a page of 100 (~45 KB) fits, the session's whole sync log (~0.9 MB) does not


@pytest_asyncio.fixture
async def client(fake: FakeUpstream) -> AsyncIterator[UpstreamClient]:
    async with UpstreamClient(fake.url, max_body_bytes=BODY_BOUND) as c:
        yield c


async def long_session(fake: FakeUpstream, sid: str = SID, n: int = EVENTS) -> None:
    fake.add_session(sid)
    for i in range(n):
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": f"msg_{i // 10}",
                                                            "textID": f"text-{i}", "text": "word " * 40},
                          live=False)


def upstream_ids(fake: FakeUpstream, sid: str = SID) -> list[tuple[int, str]]:
    return [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]


class Asked:
    """The `after` of every /history request the fake upstream received, as events to wait on."""

    def __init__(self, fake: FakeUpstream) -> None:
        self._events: dict[int, asyncio.Event] = {}
        fake.on_history = self._seen

    def event(self, after: int) -> asyncio.Event:
        return self._events.setdefault(after, asyncio.Event())

    async def _seen(self, _sid: str, after: int) -> None:
        self.event(after).set()


class PipelineSink(StoreSink):
    """Checks that writes are sequential and in order, and makes each page's write wait until the request
    for the next page arrived upstream (`after=` its last seq); `fault(last_seq)` runs then, before the
    real write."""

    def __init__(self, store: EventStore, epoch: int, asked: Asked, *, start: int = 0,
                 fault: Callable[[int], Awaitable[None]] | None = None) -> None:
        super().__init__(store, SID, epoch)
        self._asked = asked
        self._fault = fault
        self.next_seq = start + 1
        self.in_flight = 0
        self.writes: list[tuple[int, int]] = []  # (first seq, last seq) of each write that returned

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        assert self.in_flight == 0, "two writes of one session at once"
        self.in_flight += 1
        try:
            first, last = events[0].seq, events[-1].seq
            assert first == self.next_seq and last is not None, (first, self.next_seq)
            if last < EVENTS:
                await asyncio.wait_for(self._asked.event(last).wait(), 10)  # page n+1 asked before n returns
            if self._fault is not None:
                await self._fault(last)
            cursor = await super().write(events, received_at)
            self.writes.append((first, last))
            self.next_seq = cursor + 1
            return cursor
        finally:
            self.in_flight -= 1


def follower(client: UpstreamClient, sink: StoreSink, cursor: int = 0) -> DurableFollower:
    return DurableFollower(SID, client, sink, cursor, FollowerSettings(
        reconnect_min_s=0.01, reconnect_max_s=0.05, upstream=UPSTREAM, history_page=PAGE))


async def stop(task: asyncio.Task[FollowerExit]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def stored_count(engine: AsyncEngine) -> tuple[int, int]:
    async with engine.connect() as c:
        rows = (await c.execute(text("select count(*) from chat_session_events where upstream = :u"),
                                {"u": UPSTREAM})).scalar_one()
        rejects = (await c.execute(text("select count(*) from chat_event_rejects"))).scalar_one()
    return rows, rejects


async def test_a_long_catch_up_fetches_the_next_page_while_one_is_written_and_stores_exactly_the_upstream(
        fake: FakeUpstream, client: UpstreamClient, store: EventStore, engine: AsyncEngine) -> None:
    await long_session(fake)
    asked = Asked(fake)
    epoch, cursor = await store.claim(SID, "owner-1")
    sink = PipelineSink(store, epoch, asked)
    f = follower(client, sink, cursor)
    task = asyncio.create_task(f.run())
    try:
        await wait_until(lambda: f.cursor == EVENTS, 30, 0.01, message="caught up")
    finally:
        await stop(task)
    assert sink.writes == [(s, s + PAGE - 1) for s in range(1, EVENTS, PAGE)]
    assert await stored_ids(store, SID) == upstream_ids(fake)
    assert await stored_count(engine) == (EVENTS, 0)


async def resume(client: UpstreamClient, store: EventStore, asked: Asked, owner: str,
                 expected_cursor: int) -> PipelineSink:
    """What the registry does after a follower ended: claim, and a new follower from the stored cursor,
    until it has caught up; its sink (the writes it made)."""
    epoch, cursor = await store.claim(SID, owner)
    assert cursor == expected_cursor
    sink = PipelineSink(store, epoch, asked, start=cursor)
    again = follower(client, sink, cursor)
    task = asyncio.create_task(again.run())
    try:
        await wait_until(lambda: again.cursor == EVENTS, 30, 0.01, message="resumed and caught up")
    finally:
        await stop(task)
    return sink


async def test_a_lease_taken_over_mid_catch_up_drops_the_page_ahead_and_the_new_owner_resumes(
        fake: FakeUpstream, client: UpstreamClient, store: EventStore, engine: AsyncEngine) -> None:
    await long_session(fake)
    asked = Asked(fake)

    async def taken_over(last: int) -> None:
        if last == 500:  # page 6 is being fetched (or fetched) while page 5 is written
            await store.claim(SID, "owner-2", holder_dead=lambda _owner: True)

    epoch, _ = await store.claim(SID, "owner-1")
    first = follower(client, PipelineSink(store, epoch, asked, fault=taken_over))
    assert await asyncio.wait_for(first.run(), 30) is FollowerExit.LEASE_LOST
    assert asked.event(500).is_set()
    assert [s for s, _ in await stored_ids(store, SID)] == list(range(1, 401))  # nothing of pages 5 and 6

    sink = await resume(client, store, asked, "owner-2", expected_cursor=400)
    assert sink.writes[0] == (401, 500)
    assert await stored_ids(store, SID) == upstream_ids(fake)
    assert await stored_count(engine) == (EVENTS, 0)


async def test_a_connection_killed_mid_write_drops_the_page_ahead_and_the_follower_resumes_from_its_cursor(
        fake: FakeUpstream, client: UpstreamClient, engine: AsyncEngine) -> None:
    await long_session(fake)
    asked = Asked(fake)
    armed: list[bool] = []

    async def arm(last: int) -> None:
        if last == 700 and not armed:
            armed.append(True)

    async def kill_writer(conn: AsyncConnection) -> None:
        if armed == [True]:  # between the insert and the cursor update of page 7's transaction
            armed.append(False)
            pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            async with engine.connect() as killer:
                await killer.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})

    store = EventStore(engine, UPSTREAM, before_cursor_update=kill_writer)
    epoch, _ = await store.claim(SID, "owner-1")
    first = follower(client, PipelineSink(store, epoch, asked, fault=arm))
    with pytest.raises(DBAPIError):
        await asyncio.wait_for(first.run(), 30)
    assert armed == [True, False] and asked.event(700).is_set()
    row = await store.get_session(SID)
    assert row is not None and row.cursor_seq == 600
    assert [s for s, _ in await stored_ids(store, SID)] == list(range(1, 601))  # page 7 rolled back whole

    sink = await resume(client, store, asked, "owner-1", expected_cursor=600)
    assert sink.writes[0] == (601, 700)
    assert await stored_ids(store, SID) == upstream_ids(fake)
    assert await stored_count(engine) == (EVENTS, 0)


async def warm_up_through_a_bound(fake: FakeUpstream, store: EventStore, client: UpstreamClient, sids: list[str],
                                  gate: asyncio.Event, held: Callable[[], bool], message: str,
                                  after_first: Callable[[], bool] | None = None) -> None:
    """Start a follower per session on one client; wait until `held` (requests held by the fake behind
    `gate`, the rest waiting for a slot), open the gate, wait until every follower streams, stop them.
    `after_first`: start the first session's follower alone and the others once it holds true."""
    followers, tasks = [], []
    for k, sid in enumerate(sids):
        if k == 1 and after_first is not None:
            await wait_until(after_first, 10, 0.01, message="the first session's request held")
        epoch, cursor = await store.claim(sid, "owner-1")
        f = DurableFollower(sid, client, StoreSink(store, sid, epoch), cursor, FollowerSettings(upstream=UPSTREAM))
        followers.append(f)
        tasks.append(asyncio.create_task(f.run()))
    try:
        await wait_until(held, 10, 0.01, message=message)
        gate.set()
        await wait_until(lambda: all(f.connected.is_set() or fake.durable_requests(f.session_id)
                                     for f in followers), 10, 0.01, message="all caught up, streaming")
    finally:
        for t in tasks:
            await stop(t)


async def test_history_pages_in_flight_are_bounded_across_followers(fake: FakeUpstream,
                                                                   engine: AsyncEngine) -> None:
    # A warm-up of many sessions pages /history through one client: at most its bound at once, the rest
    # wait for a slot (and get it: every session is mirrored).
    store = EventStore(engine, UPSTREAM)
    sids = [f"ses_W{k}" for k in range(10)]
    for sid in sids:
        fake.add_session(sid)
        for i in range(3):
            await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "m", "textID": f"t{i}",
                                                                "text": "x"}, live=False)
    gate = asyncio.Event()

    async def held(_sid: str, _after: int) -> None:
        await gate.wait()

    fake.on_history = held
    async with UpstreamClient(fake.url, limits=ClientLimits(history_pages_in_flight=4)) as client:
        await warm_up_through_a_bound(fake, store, client, sids, gate,
                                      lambda: fake.history_in_flight == 4 and client.history_slots.waiting == 6,
                                      "4 pages in flight, 6 waiting for a slot")
    assert fake.history_max_in_flight == 4
    for sid in sids:
        assert await stored_ids(store, sid) == upstream_ids(fake, sid)


async def test_sync_logs_are_asked_together_within_the_slots(fake: FakeUpstream, engine: AsyncEngine) -> None:
    # Every catch-up starts with a sync-log read: the sessions waiting for one are asked together
    # (bridge.upstream.sync_batch), at most the client's bound of calls at once; every session is mirrored.
    store = EventStore(engine, UPSTREAM)
    sids = [f"ses_S{k}" for k in range(6)]
    for sid in sids:
        fake.add_session(sid)
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "m", "textID": "t", "text": "x"},
                          live=False)
    gate = asyncio.Event()

    async def held() -> None:
        await gate.wait()

    fake.on_sync = held
    asked = Since("bridge_sync_call_sessions_sum")
    async with UpstreamClient(fake.url, limits=ClientLimits(
            sync_logs_in_flight=1, sync_batch=BatchSettings(max_sessions=3))) as client:
        # The others ask once the first call is out (else they may all ride that one call, and nothing
        # ever waits for the slot).
        await warm_up_through_a_bound(fake, store, client, sids, gate,
                                      lambda: fake.sync_in_flight == 1 and client.sync_slots.waiting == 1,
                                      "1 sync call in flight, the next one waiting for the slot",
                                      after_first=lambda: fake.sync_in_flight == 1)
        assert asked.value == 6
    assert fake.sync_max_in_flight == 1
    # The first call (whoever came within the window, at most 3), then the rest, 3 per call, not 6 calls.
    assert fake.sync_calls <= 3
    for sid in sids:
        assert await stored_ids(store, sid) == upstream_ids(fake, sid)
