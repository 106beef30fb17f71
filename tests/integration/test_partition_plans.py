"""Every per-session statement on `chat_session_events` reads ONE partition, by an index (docs/lifecycle.md,
"Partitions"): checked on executed plans (`EXPLAIN ANALYZE`: a partition the executor pruned is never
executed), on a table with sessions in four day partitions besides the legacy and the default one — the
write path's own reads (chain anchor, rows inserted here, the duplicate check, the relink), the feed's and
the replay's page, the audit's reads, the tree's parent, the turn tail (the head a new owner reads), the
listing's event count, the removal's delete."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import Select, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.store import partitions
from bridge.store.chat_sessions import tree
from bridge.store.chat_sessions.reader import EVENT_COUNT
from bridge.store.chat_sessions.status import select_turn_tail
from bridge.store.lifecycle.removal import _PRUNED, SESSION_TABLES
from bridge.store.reads import queries
from bridge.store.reads.replay import _KINDS, _PYTHON_KINDS, FRAMES_AFTER
from bridge.store.schema import chat_sessions
from bridge.store.writes import EventStore
from bridge.store.writes import transaction as write
from bridge.store.writes.chain import _CHAIN_NEW_EVENTS
from bridge.store.writes.copy_in import CHAIN_ANCHORS, CHECK_LINKS
from bridge.store.writes.rejects import stored_events_matching
from tests.support.chat_events import RECEIVED_AT, batch

TODAY = partitions.utc_today()
DAYS = [TODAY - timedelta(days=n) for n in (3, 2, 1, 0)]
TARGET = "ses_plan_target"
TARGET_DAY = DAYS[1]
SESSIONS_A_DAY = 25
EVENTS = 60


def _scans(node: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(relation, node type, loops) of every scan of an events table in the plan."""
    out = []
    rel = node.get("Relation Name", "")
    if rel.startswith("chat_session_events_"):
        out.append((rel, node["Node Type"], int(node.get("Actual Loops", 0))))
    for child in node.get("Plans", []):
        out.extend(_scans(child))
    return out


async def _executed(conn: AsyncConnection, sql: str, params: Any = None, driver: bool = False) -> list[tuple[str, str]]:
    """The scans of event partitions the executor ran (relation, node type)."""
    explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + sql
    if driver:
        raw = await conn.get_raw_connection()
        doc = await raw.driver_connection.fetchval(explain, *params)  # type: ignore[union-attr]
    else:
        doc = (await conn.execute(text(explain), params or {})).scalar_one()
    plan = json.loads(doc) if isinstance(doc, str) else doc
    return sorted({(rel, kind) for rel, kind, loops in _scans(plan[0]["Plan"]) if loops > 0})


def _literal(stmt: Select[Any]) -> str:
    return str(stmt.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))


def _one_partition_by_index(scans: list[tuple[str, str]], sql: str = "") -> None:
    assert [rel for rel, _ in scans] == [partitions.partition_name(TARGET_DAY)], (scans, sql)
    assert all(kind in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan") for _, kind in scans), (scans, sql)


@pytest.fixture
async def filled(engine: AsyncEngine, store: EventStore) -> AsyncEngine:
    for day in DAYS:
        async with engine.begin() as conn:
            await partitions.create_day(conn, day)
    for day in DAYS:
        for k in range(SESSIONS_A_DAY):
            sid = TARGET if (day, k) == (TARGET_DAY, 0) else f"ses_plan_{day:%m%d}_{k}"
            epoch, _ = await store.claim(sid, "owner-1")
            async with engine.begin() as conn:  # the session's day, set through the data
                await conn.execute(chat_sessions.update().where(chat_sessions.c.session_id == sid)
                                   .values(session_day=day))
            await store.write_batch(sid, epoch, batch(*range(EVENTS), session_id=sid), RECEIVED_AT)
    async with engine.connect() as conn:
        await conn.execute(text("ANALYZE chat_session_events"))
        await conn.commit()
    return engine


async def test_the_rows_went_to_their_sessions_days(filled: AsyncEngine) -> None:
    async with filled.connect() as conn:
        counts = dict((await conn.execute(text(
            "SELECT tableoid::regclass::text, count(*) FROM chat_session_events GROUP BY 1"))).all())
    assert counts == {partitions.partition_name(d): SESSIONS_A_DAY * EVENTS for d in DAYS}


async def test_the_write_paths_reads_keep_to_the_sessions_partition(filled: AsyncEngine, store: EventStore) -> None:
    u, day = store.upstream, TARGET_DAY
    async with filled.connect() as conn:
        _one_partition_by_index(await _executed(conn, CHAIN_ANCHORS, (u, [TARGET], [100], [day]), driver=True))
        _one_partition_by_index(await _executed(conn, write.INSERTED_HERE, (u, [TARGET], [5], [day]), driver=True))
        _one_partition_by_index(await _executed(
            conn, CHECK_LINKS, (u, [TARGET], [5], [9], ["x"], [day]), driver=True))
        _one_partition_by_index(await _executed(conn, _literal(stored_events_matching(u, TARGET, day, [3], ["e"]))))
        relink = _CHAIN_NEW_EVENTS.text  # an UPDATE: explained, executed, rolled back
        scans = await _executed(conn, relink, {"u": u, "s": TARGET, "d": day, "seqs": [7, 8], "genesis": "g"})
        await conn.rollback()
        assert {rel for rel, _ in scans} == {partitions.partition_name(day)}, scans


async def test_the_feeds_the_replays_the_audits_and_the_trees_reads_keep_to_it(
    filled: AsyncEngine, store: EventStore
) -> None:
    u = store.upstream
    statements = [
        queries.select_events_after(u, TARGET, 10, 100),
        queries.select_events_page(u, TARGET, 10, 100),
        queries.select_transcript_page(u, TARGET, 10, 100),
        queries.select_chain_rows(u, TARGET),
        queries.select_event_count(u, TARGET),
        queries.select_seed_rows(u, TARGET, ["text:end"]),
        tree.select_parent(u, TARGET),
        select_turn_tail(u, TARGET, 20),
        select(chat_sessions.c.session_id, EVENT_COUNT).where(chat_sessions.c.session_id == TARGET),
        select(chat_sessions.c.session_id, tree.PARENT_COLUMN).where(chat_sessions.c.session_id == TARGET),
    ]
    async with filled.connect() as conn:
        for stmt in statements:
            _one_partition_by_index(await _executed(conn, _literal(stmt)), _literal(stmt))
        params = {"u": u, "s": TARGET, "after": 10, "limit": 100, "kinds": _KINDS, "python_kinds": _PYTHON_KINDS}
        _one_partition_by_index(await _executed(conn, FRAMES_AFTER.text, params))


async def test_the_removal_deletes_from_the_sessions_partition_only(filled: AsyncEngine, store: EventStore) -> None:
    where = SESSION_TABLES["chat_session_events"] + _PRUNED["chat_session_events"]
    async with filled.connect() as conn:
        scans = await _executed(conn, f"DELETE FROM chat_session_events WHERE upstream = :upstream AND {where}",
                                {"upstream": store.upstream, "ids": [TARGET], "days": [TARGET_DAY]})
        await conn.rollback()
    _one_partition_by_index(scans)


def test_a_partitions_name_gives_its_day_back() -> None:
    day = date(2026, 12, 6)
    assert partitions.day_of_partition(partitions.partition_name(day)) == day
    assert partitions.day_of_partition(partitions.LEGACY) is None
    assert partitions.day_of_partition(partitions.DEFAULT) is None
    assert partitions.day_of_partition("chat_session_events_p2026120") is None
