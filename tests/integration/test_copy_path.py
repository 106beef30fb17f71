"""The write transaction's fast path (bridge.store.writes.transaction): rows go in by COPY when nothing
clashes; anything COPY refuses rolls back to its savepoint and takes the INSERT path with the same outcome;
every link COPY stored is checked by PostgreSQL against its own text of the payload."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import metrics
from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import BatchResult, EventStore
from bridge.store.writes import transaction as write
from tests.support.chat_events import RECEIVED_AT, batch, chat_event, event_id
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until


@pytest.fixture(autouse=True)
def copy_every_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small groups take the INSERT path (one round trip); these tests drive the COPY path with a few rows."""
    monkeypatch.setattr(write, "COPY_MIN_ROWS", 1)


def refused(reason: str) -> float:
    return metrics.REGISTRY.get_sample_value("bridge_group_commit_copy_refused_total", {"reason": reason}) or 0.0


def rows_sent(path: str) -> float:
    return metrics.REGISTRY.get_sample_value("bridge_group_commit_rows_total", {"path": path}) or 0.0


async def test_a_group_without_clashes_goes_in_by_copy_and_its_chain_verifies(
    store: EventStore, engine: AsyncEngine
) -> None:
    sids = [f"ses_copy{k}" for k in range(3)]
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in sids}
    copied, inserted = rows_sent("copy"), rows_sent("insert")
    writes = [store.prepare(sid, epochs[sid], batch(1, 2, 3, session_id=sid), RECEIVED_AT) for sid in sids]

    results = await store.commit(writes)

    assert results == [BatchResult(inserted=3, duplicates=0, rejected=0, cursor_seq=3)] * 3
    assert rows_sent("copy") - copied == 9 and rows_sent("insert") == inserted
    reader = AuditReader(engine, store.upstream)
    for sid in sids:
        report = verify_chain(await reader.chain_rows(sid))
        assert report.ok and report.events == 3
    # A second batch chains on the first one's last link (the anchor), by COPY again.
    await store.commit([store.prepare(sids[0], epochs[sids[0]], batch(4, 5, session_id=sids[0]), RECEIVED_AT)])
    assert rows_sent("copy") - copied == 11
    assert verify_chain(await reader.chain_rows(sids[0])).events == 5


async def test_a_quiet_session_s_few_rows_take_the_insert_path(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write, "COPY_MIN_ROWS", 32)
    sid = "ses_copyquiet"
    epoch, _ = await store.claim(sid, "owner-1")
    copied, inserted = rows_sent("copy"), rows_sent("insert")
    await store.write_batch(sid, epoch, batch(1, session_id=sid), RECEIVED_AT)
    await store.write_batch(sid, epoch, batch(*range(2, 34), session_id=sid), RECEIVED_AT)
    assert rows_sent("insert") - inserted == 1 and rows_sent("copy") - copied == 32


async def test_a_clash_with_a_stored_row_rolls_back_the_copy_and_takes_the_insert_path(
    store: EventStore, engine: AsyncEngine
) -> None:
    sid = "ses_copyclash"
    epoch, _ = await store.claim(sid, "owner-1")
    await store.write_batch(sid, epoch, batch(1, 2, 3, session_id=sid), RECEIVED_AT)
    copied, inserted, refusals = rows_sent("copy"), rows_sent("insert"), refused("UniqueViolationError")

    result = await store.write_batch(sid, epoch, batch(2, 3, 4, 5, session_id=sid), RECEIVED_AT)

    assert result == BatchResult(inserted=2, duplicates=2, rejected=0, cursor_seq=5)
    assert rows_sent("copy") == copied and rows_sent("insert") - inserted == 4
    assert refused("UniqueViolationError") - refusals == 1
    assert [s for s, _ in await stored_ids(store, sid)] == [1, 2, 3, 4, 5]
    assert verify_chain(await AuditReader(engine, store.upstream).chain_rows(sid)).ok


async def test_an_event_id_is_unique_per_session_so_two_sessions_holding_one_both_keep_it(
    store: EventStore, engine: AsyncEngine
) -> None:
    """The decision of docs/lifecycle.md ("Partitions"): the event-id key is per session (it must hold the
    partition key). An event is stored only in the session its aggregate names (bridge.upstream.admit
    rejects it elsewhere as `wrong_session`: tests/unit/test_ingest.py), so one event cannot reach two
    sessions; two sessions carrying one id are two events, and both are kept, each chain whole."""
    a, b = "ses_copyidA", "ses_copyidB"
    epochs = {sid: (await store.claim(sid, "owner-1"))[0] for sid in (a, b)}
    same = chat_event(1, session_id=b, id_=event_id(1, a))  # b's seq 1 carries a's event id
    writes = [store.prepare(a, epochs[a], batch(1, 2, session_id=a), RECEIVED_AT),
              store.prepare(b, epochs[b], [same, *batch(2, session_id=b)], RECEIVED_AT)]

    results = await store.commit(writes)

    assert results == [BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2),
                       BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2)]
    assert await stored_ids(store, b) == [(1, event_id(1, a)), (2, event_id(2, b))]
    reader = AuditReader(engine, store.upstream)
    assert verify_chain(await reader.chain_rows(a)).ok and verify_chain(await reader.chain_rows(b)).ok


async def test_a_link_computed_over_a_text_postgresql_prints_otherwise_is_caught_and_relinked(
    store: EventStore, engine: AsyncEngine
) -> None:
    """Were the Python text of a payload ever not PostgreSQL's own (a bug in bridge.store.jsonb_text), the
    link computed from it would not verify: the check after COPY finds it and PostgreSQL relinks."""
    sid = "ses_copywrongtext"
    epoch, _ = await store.claim(sid, "owner-1")
    write = store.prepare(sid, epoch, batch(1, 2, 3, session_id=sid), RECEIVED_AT)
    wrong = dataclasses.replace(write.events[1], payload_text=write.events[1].payload_text.replace(", ", ","))
    assert wrong.payload_text != write.events[1].payload_text and wrong.canonical
    copied = rows_sent("copy")

    await store.commit([dataclasses.replace(write, events=[write.events[0], wrong, write.events[2]])])

    assert rows_sent("copy") - copied == 3
    report = verify_chain(await AuditReader(engine, store.upstream).chain_rows(sid))
    assert report.ok and report.events == 3


async def test_a_connection_lost_during_the_copy_fails_the_group_as_a_lost_connection(
    store: EventStore, engine: AsyncEngine
) -> None:
    """The COPY waits on another transaction holding the same row key; the writer's backend is terminated
    while it waits: the group fails with the invalidated DBAPIError every caller knows, nothing stored."""
    sid = "ses_copykilled"
    epoch, _ = await store.claim(sid, "owner-1")
    async with engine.connect() as blocker:
        await blocker.begin()
        await blocker.execute(text(
            "INSERT INTO chat_session_events (upstream, session_id, seq, event_id, type, kind, received_at, payload,"
            " session_day) SELECT :u, :s, 1, 'evt_blocker', 't', 'text', now(), '{}', session_day"
            " FROM chat_sessions WHERE upstream = :u AND session_id = :s"),
            {"u": store.upstream, "s": sid})
        task = asyncio.create_task(store.write_batch(sid, epoch, batch(1, 2, session_id=sid), RECEIVED_AT))

        async def waiting_writer() -> int | None:
            async with engine.connect() as probe:
                return (await probe.execute(text(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'COPY%'")
                )).scalar()

        pid: list[int] = []

        async def found() -> bool:
            p = await waiting_writer()
            if p is not None:
                pid.append(p)
            return p is not None

        await wait_until(found, timeout=10, message="the COPY never waited on the blocker")
        async with engine.connect() as killer:
            await killer.execute(text("SELECT pg_terminate_backend(:p, 10000)"), {"p": pid[0]})
        with pytest.raises(DBAPIError) as lost:
            await task
        assert lost.value.connection_invalidated
        await blocker.rollback()
    assert await stored_ids(store, sid) == []
    again = await store.write_batch(sid, epoch, batch(1, 2, session_id=sid), RECEIVED_AT)
    assert again == BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2)
