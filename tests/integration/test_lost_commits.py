"""The database loses a session's newest commits (what a failover to a lagging standby does; here the rows
and the cursor are set back by SQL on one server, tests/integration/test_replication.py does it for real):
the bridge notices and re-reads them from the sync log (docs/scaling.md, "Failover").

- a write presenting a cursor the database does not hold is refused whole (`CursorBehind`), nothing stored;
- an active session: its next batch is refused, the follower rewinds to the stored cursor and repairs;
- a quiet session: nothing is written to it, `database_back()` (the LISTEN connection came back) makes its
  follower compare cursors and repair;
- afterwards stored (seq, event_id) == the upstream's log, and the audit chain verifies (relinked from the
  surviving row, not forked).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import metrics
from bridge.config import load_settings
from bridge.errors import CursorBehind
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.chat_events import batch
from tests.support.fake_upstream import FakeUpstream
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:lost"


async def lose_after(engine: AsyncEngine, session_id: str, keep: int) -> None:
    """What a failover to a standby that had received only up to seq `keep` leaves of the session."""
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM chat_session_events WHERE upstream = :u AND session_id = :s "
                                "AND seq > :k"), {"u": UPSTREAM, "s": session_id, "k": keep})
        await conn.execute(text("UPDATE chat_sessions SET cursor_seq = :k WHERE upstream = :u AND session_id = :s"),
                           {"u": UPSTREAM, "s": session_id, "k": keep})


def event_ids(fake: FakeUpstream, sid: str) -> list[tuple[int, str]]:
    """The (seq, event_id) of the session's events upstream (its seq 0 not included)."""
    return [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]


async def append_texts(fake: FakeUpstream, sid: str, texts: range) -> None:
    for i in texts:
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "a", "textID": f"t{i}",
                                                            "text": f"part {i}"})


@contextlib.asynccontextmanager
async def supervising(store: EventStore, fake: FakeUpstream, *sessions: str) -> AsyncIterator[FollowerSupervisor]:
    """A running supervisor on the fake (quick reconnects), `sessions` warm."""
    settings = load_settings({"BRIDGE_UPSTREAM_URL": fake.url, "BRIDGE_UPSTREAM_NAME": UPSTREAM,
                              "BRIDGE_RECONNECT_MIN_S": "0.05", "BRIDGE_RECONNECT_MAX_S": "0.3"})
    async with UpstreamClient(fake.url) as client:
        sup = FollowerSupervisor(store, client, settings, "test-owner")
        run = asyncio.create_task(sup.run())
        try:
            await wait_until(lambda: sup.running, 5, 0.01)
            for sid in sessions:
                sup.warm(sid, reason="test")
            yield sup
        finally:
            sup.stop()
            await run


async def assert_chains_verify(engine: AsyncEngine, events: dict[str, int]) -> None:
    """Each session's audit chain verifies and holds `events[session]` events (relinked, not forked)."""
    reader = AuditReader(engine, UPSTREAM)
    for sid, n in events.items():
        report = verify_chain(await reader.chain_rows(sid))
        assert report.ok and report.events == n, (sid, report.broken)


async def test_a_write_above_what_the_database_holds_is_refused_whole(engine: AsyncEngine) -> None:
    store = EventStore(engine, UPSTREAM)
    sid = "ses_refused"
    epoch, _ = await store.claim(sid, "owner")
    now = datetime.now(UTC)
    first = await store.write_batch(sid, epoch, batch(1, 2, 3, session_id=sid), now, expected_cursor=-1)
    assert first.cursor_seq == 3
    await lose_after(engine, sid, 1)
    with pytest.raises(CursorBehind) as refused:
        await store.write_batch(sid, epoch, batch(4, 5, session_id=sid), now, expected_cursor=3)
    assert refused.value.stored == 1
    assert await stored_ids(store, sid) == [(1, "evt_ses_refused_00000001")]  # nothing of the batch went in
    # The writer that knows the stored cursor goes on (and without a check, as before).
    assert (await store.write_batch(sid, epoch, batch(2, session_id=sid), now, expected_cursor=1)).cursor_seq == 2
    assert (await store.write_batch(sid, epoch, batch(3, session_id=sid), now)).cursor_seq == 3


async def test_lost_rows_are_read_again_from_the_sync_log(engine: AsyncEngine, fake: FakeUpstream) -> None:
    store = EventStore(engine, UPSTREAM)
    active, quiet = "ses_active", "ses_quiet"
    for sid in (active, quiet):
        fake.add_session(sid)

    async def mirrored() -> bool:
        for sid in (active, quiet):
            if await stored_ids(store, sid) != event_ids(fake, sid):
                return False
        return True

    async with supervising(store, fake, active, quiet) as sup:
        for sid in (active, quiet):
            await append_texts(fake, sid, range(12))
        await wait_until(mirrored, 20, 0.05, message="mirrored before the loss")
        rewinds = {c: metrics.CURSOR_REWINDS.labels(cause=c)._value.get() for c in ("write", "reconnect")}

        for sid in (active, quiet):
            await lose_after(engine, sid, 5)
        assert not await mirrored()
        # The active session's next event: its batch is refused as behind, the follower repairs.
        await fake.append(active, "session.next.text.ended", {"assistantMessageID": "a", "textID": "t12",
                                                               "text": "after the loss"})
        await wait_until(lambda: _stored_equals_log(store, fake, active), 20, 0.05, message="active repaired")
        assert metrics.CURSOR_REWINDS.labels(cause="write")._value.get() > rewinds["write"]
        # The quiet one gets no event: only the database-back check finds what it lost.
        assert not await _stored_equals_log(store, fake, quiet)
        sup.database_back()
        await wait_until(mirrored, 20, 0.05, message="quiet repaired")
        assert metrics.CURSOR_REWINDS.labels(cause="reconnect")._value.get() > rewinds["reconnect"]
        await assert_chains_verify(engine, {sid: len(fake.sessions[sid].events) for sid in (active, quiet)})


async def _stored_equals_log(store: EventStore, fake: FakeUpstream, sid: str) -> bool:
    return await stored_ids(store, sid) == event_ids(fake, sid)


async def test_a_lost_seq_0_is_read_again(engine: AsyncEngine, fake: FakeUpstream) -> None:
    """A stored cursor of 0 cannot tell whether seq 0 (`session.created`) is stored (docs/mirror.md "Seq 0"):
    a failover that lost it, alone or with what followed, must still make the follower read it again."""
    store = EventStore(engine, UPSTREAM)
    only, more = "ses_only_seq0", "ses_more"  # a session with its seq 0 only; one with events after it
    for sid in (only, more):
        fake.add_session(sid, created=True)

    def log_ids(sid: str) -> list[tuple[int, str]]:
        return sorted([(0, fake.sessions[sid].log[0]["id"]), *event_ids(fake, sid)])

    async def mirrored() -> bool:
        return all([await stored_ids(store, sid) == log_ids(sid) for sid in (only, more)])

    async with supervising(store, fake, only, more) as sup:
        await append_texts(fake, more, range(3))
        await wait_until(mirrored, 20, 0.05, message="mirrored before the loss")
        async with engine.begin() as conn:  # the standby had the claims, not one event: cursors at 0
            await conn.execute(text("DELETE FROM chat_session_events WHERE upstream = :u"), {"u": UPSTREAM})
            await conn.execute(text("UPDATE chat_sessions SET cursor_seq = 0 WHERE upstream = :u"),
                               {"u": UPSTREAM})
        assert not await mirrored()
        sup.database_back()
        await wait_until(mirrored, 20, 0.05, message="seq 0 read again, and what followed it")
        await assert_chains_verify(engine, {sid: len(log_ids(sid)) for sid in (only, more)})
