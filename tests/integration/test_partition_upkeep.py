"""The day partitions the bridge makes ahead (bridge.store.partitions, docs/lifecycle.md "Partitions"): today's
and the next days', once; a row whose day has no partition lands in the default partition, is read and
written like any other, and is reported (metric, and the day cannot get its partition while it is there)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import metrics
from bridge.store import partitions
from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import BatchResult, EventStore
from tests.support.chat_events import RECEIVED_AT, batch, event_id
from tests.support.stored_rows import stored_ids


def _default_rows_gauge() -> float | None:
    return metrics.REGISTRY.get_sample_value("bridge_partition_default_rows")


async def test_today_and_the_next_days_are_made_once(engine: AsyncEngine, store: EventStore) -> None:
    today = partitions.utc_today()
    made = await partitions.ensure_partitions(engine, today, ahead=2)
    assert made == [today, today + timedelta(days=1), today + timedelta(days=2)]
    assert await partitions.ensure_partitions(engine, today, ahead=2) == []
    async with engine.connect() as conn:
        assert set(await partitions.day_partitions(conn)) == set(made)

    epoch, _ = await store.claim("ses_upkeep_new", "owner-1")
    await store.write_batch("ses_upkeep_new", epoch, batch(1, 2, session_id="ses_upkeep_new"), RECEIVED_AT)
    async with engine.connect() as conn:
        where = (await conn.execute(text("SELECT DISTINCT tableoid::regclass::text FROM chat_session_events "
                                         "WHERE session_id = 'ses_upkeep_new'"))).scalars().all()
    assert where == [partitions.partition_name(today)]  # a new session's day is today's
    assert _default_rows_gauge() == 0


async def test_a_day_without_its_partition_goes_to_the_default_one_and_is_reported(
    engine: AsyncEngine, store: EventStore
) -> None:
    today = partitions.utc_today()
    stray_day = today - timedelta(days=3)
    sid = "ses_upkeep_stray"
    epoch, _ = await store.claim(sid, "owner-1")
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE chat_sessions SET session_day = :d WHERE session_id = :s"),
                           {"d": stray_day, "s": sid})
    assert await store.write_batch(sid, epoch, batch(1, 2, 3, session_id=sid), RECEIVED_AT) == \
        BatchResult(inserted=3, duplicates=0, rejected=0, cursor_seq=3)

    await partitions.ensure_partitions(engine, today, ahead=0)

    assert _default_rows_gauge() == 3
    assert await stored_ids(store, sid) == [(s, event_id(s, sid)) for s in (1, 2, 3)]
    assert verify_chain(await AuditReader(engine, store.upstream).chain_rows(sid)).ok
    errors = metrics.REGISTRY.get_sample_value("bridge_partition_errors_total", {"step": "create"}) or 0.0
    assert await partitions.ensure_partitions(engine, stray_day, ahead=0) == []  # its rows are in the way
    assert (metrics.REGISTRY.get_sample_value("bridge_partition_errors_total", {"step": "create"}) or 0.0) == errors + 1
