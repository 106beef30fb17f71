"""Group commit across sessions (bridge.store.writes.committer): many sessions' batches in one transaction, each
waiter answered after its COMMIT, fencing and duplicates per session, nothing half-stored when the
connection dies, a quiet session not held back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.errors import LeaseLost
from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import BatchResult, EventStore
from bridge.store.writes.committer import GroupCommitter
from bridge.store.writes.transaction import Fenced, SessionWrite
from bridge.upstream.store_sink import StoreSink
from tests.support.chat_events import RECEIVED_AT, batch, chat_event
from tests.support.group_commits import Groups
from tests.support.metric_values import Since
from tests.support.stored_rows import stored_ids
from tests.support.tasks import in_background
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("write_path")  # both ways rows go in (conftest)


SESSIONS = [f"ses_group{k:03d}" for k in range(12)]


async def submit_together(
    committer: GroupCommitter, writes: Sequence[SessionWrite]
) -> list[BatchResult | Fenced | BaseException]:
    """Queue every write before the committer starts, so that they can only form one group."""
    waiting = Since("bridge_group_commit_waiting_writes")
    tasks = [asyncio.create_task(committer.submit(w)) for w in writes]
    await wait_until(lambda: waiting.value == len(writes), timeout=5, message="writes not queued")
    async with in_background(committer.run()):
        return await asyncio.gather(*tasks, return_exceptions=True)


async def xmins(engine: AsyncEngine, upstream: str) -> set[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(text("SELECT DISTINCT xmin::text FROM chat_session_events WHERE upstream = :u"),
                                  {"u": upstream})
        return {str(r[0]) for r in rows}


async def test_the_batches_of_many_sessions_commit_in_one_transaction(store: EventStore, engine: AsyncEngine) -> None:
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in SESSIONS}
    committer = GroupCommitter(store.commit, groups_in_flight=1)
    writes = [store.prepare(sid, epochs[sid], batch(1, 2, 3, session_id=sid), RECEIVED_AT) for sid in SESSIONS]
    groups = Groups()

    results = await submit_together(committer, writes)

    assert results == [BatchResult(inserted=3, duplicates=0, rejected=0, cursor_seq=3)] * len(SESSIONS)
    assert groups.committed == 1
    assert len(await xmins(engine, store.upstream)) == 1  # every row written by the same transaction
    reader = AuditReader(engine, store.upstream)
    for sid in SESSIONS:
        assert [s for s, _ in await stored_ids(store, sid)] == [1, 2, 3]
        session = await store.get_session(sid)
        assert session is not None and session.cursor_seq == 3
        assert verify_chain(await reader.chain_rows(sid)).ok


async def test_a_fenced_off_session_is_refused_while_the_others_commit(store: EventStore, engine: AsyncEngine) -> None:
    a, b, c = SESSIONS[:3]
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in (a, b, c)}
    await store.claim(b, "owner-2", holder_dead=lambda _owner: True)  # b's lease moved on: owner-1's epoch is stale
    committer = GroupCommitter(store.commit, groups_in_flight=1)
    writes = [store.prepare(sid, epochs[sid], batch(1, 2, session_id=sid), RECEIVED_AT) for sid in (a, b, c)]
    groups = Groups()

    results = await submit_together(committer, writes)

    assert results[0] == results[2] == BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2)
    assert isinstance(results[1], Fenced) and results[1].presented == epochs[b]
    assert groups.committed == 1
    assert await stored_ids(store, b) == []
    session_b = await store.get_session(b)
    assert session_b is not None and session_b.cursor_seq == 0
    assert [s for s, _ in await stored_ids(store, a)] == [s for s, _ in await stored_ids(store, c)] == [1, 2]


async def test_the_sink_of_a_fenced_off_session_raises_lease_lost_through_the_committer(store: EventStore) -> None:
    sid = SESSIONS[0]
    epoch, _ = await store.claim(sid, "owner-1")
    await store.claim(sid, "owner-2", holder_dead=lambda _owner: True)
    async with store.group_commit():
        with pytest.raises(LeaseLost):
            await StoreSink(store, sid, epoch).write(batch(1, session_id=sid), RECEIVED_AT)
    assert await stored_ids(store, sid) == []


async def test_a_conflicting_duplicate_in_a_group_is_kept_as_a_reject(store: EventStore, engine: AsyncEngine) -> None:
    a, b = SESSIONS[:2]
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in (a, b)}
    await store.write_batch(a, epochs[a], batch(1, session_id=a), RECEIVED_AT)
    committer = GroupCommitter(store.commit, groups_in_flight=1)
    clash = chat_event(1, session_id=a, id_="evt_other_id_at_seq_1")
    writes = [
        store.prepare(a, epochs[a], [clash, *batch(2, 3, session_id=a)], RECEIVED_AT),
        store.prepare(b, epochs[b], batch(1, 2, session_id=b), RECEIVED_AT),
    ]

    results = await submit_together(committer, writes)

    assert results == [BatchResult(inserted=2, duplicates=0, rejected=1, cursor_seq=3),
                       BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2)]
    async with engine.connect() as conn:
        rejects = (await conn.execute(text(
            "SELECT session_id, seq, event_id, reason FROM chat_event_rejects WHERE upstream = :u"),
            {"u": store.upstream})).all()
    assert [tuple(r) for r in rejects] == [(a, 1, "evt_other_id_at_seq_1", "conflicting_duplicate")]
    reader = AuditReader(engine, store.upstream)
    assert verify_chain(await reader.chain_rows(a)).ok  # relinked over what was really inserted
    assert verify_chain(await reader.chain_rows(b)).ok


async def test_a_connection_killed_mid_group_stores_nothing_and_every_waiter_fails(
    store: EventStore, engine: AsyncEngine
) -> None:
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in SESSIONS[:4]}

    async def kill_writer(conn: AsyncConnection) -> None:
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with engine.connect() as killer:
            await killer.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})

    doomed = EventStore(engine, store.upstream, before_cursor_update=kill_writer)
    writes = [store.prepare(sid, e, batch(1, 2, session_id=sid), RECEIVED_AT) for sid, e in epochs.items()]

    results = await submit_together(GroupCommitter(doomed.commit, groups_in_flight=1), writes)

    assert all(isinstance(r, DBAPIError) for r in results), results
    for sid in epochs:
        assert await stored_ids(store, sid) == []
        session = await store.get_session(sid)
        assert session is not None and session.cursor_seq == 0
    retried = await submit_together(GroupCommitter(store.commit), writes)
    assert retried == [BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2)] * len(writes)


async def test_a_batch_postgresql_refuses_fails_only_its_own_session(store: EventStore, engine: AsyncEngine) -> None:
    a, b = SESSIONS[:2]
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in (a, b)}
    calls: list[int] = []

    async def refuse_groups_with_a(conn: AsyncConnection) -> None:
        calls.append(1)
        has_a = (await conn.execute(text(
            "SELECT count(*) FROM chat_session_events WHERE upstream = :u AND session_id = :s"),
            {"u": store.upstream, "s": a})).scalar_one()
        if has_a:
            raise RuntimeError("refused")

    picky = EventStore(engine, store.upstream, before_cursor_update=refuse_groups_with_a)
    writes = [store.prepare(sid, epochs[sid], batch(1, session_id=sid), RECEIVED_AT) for sid in (a, b)]

    results = await submit_together(GroupCommitter(picky.commit, groups_in_flight=1), writes)

    assert isinstance(results[0], RuntimeError)
    assert results[1] == BatchResult(inserted=1, duplicates=0, rejected=0, cursor_seq=1)
    assert await stored_ids(store, a) == []
    assert [s for s, _ in await stored_ids(store, b)] == [1]


async def test_a_quiet_session_is_committed_without_waiting_for_company(store: EventStore) -> None:
    sid = SESSIONS[0]
    epoch, _ = await store.claim(sid, "owner-1")
    groups = Groups()
    async with store.group_commit():
        sink = StoreSink(store, sid, epoch)
        # Alone in the queue, its write must start a group at once: no timer, no minimum size.
        async with asyncio.timeout(10):
            assert await sink.write(batch(1, session_id=sid), RECEIVED_AT) == 1
        async with asyncio.timeout(10):
            assert await sink.write(batch(2, session_id=sid), RECEIVED_AT) == 2
        assert groups.committed == 2
    assert [s for s, _ in await stored_ids(store, sid)] == [1, 2]


async def test_writes_of_one_session_queued_together_commit_in_order(store: EventStore) -> None:
    sid = SESSIONS[0]
    epoch, _ = await store.claim(sid, "owner-1")
    committer = GroupCommitter(store.commit)
    writes = [store.prepare(sid, epoch, batch(s, session_id=sid), RECEIVED_AT) for s in (1, 2, 3)]

    results = await submit_together(committer, writes)

    assert [r.cursor_seq for r in results if isinstance(r, BatchResult)] == [3, 3, 3]
    assert [s for s, _ in await stored_ids(store, sid)] == [1, 2, 3]


async def test_a_write_whose_follower_stopped_before_its_group_is_not_written(store: EventStore) -> None:
    a, b = SESSIONS[:2]
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in (a, b)}
    committer = GroupCommitter(store.commit, groups_in_flight=1)
    groups, waiting = Groups(), Since("bridge_group_commit_waiting_writes")
    stopped = asyncio.create_task(committer.submit(store.prepare(a, epochs[a], batch(1, session_id=a), RECEIVED_AT)))
    kept = asyncio.create_task(committer.submit(store.prepare(b, epochs[b], batch(1, session_id=b), RECEIVED_AT)))
    await wait_until(lambda: waiting.value == 2, timeout=5, message="writes not queued")
    stopped.cancel()
    async with in_background(committer.run()):
        assert await kept == BatchResult(inserted=1, duplicates=0, rejected=0, cursor_seq=1)
        await committer.drain()
    assert stopped.cancelled()
    assert await stored_ids(store, a) == []
    assert groups.writes == 1
