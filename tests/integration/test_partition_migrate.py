"""The online migration to partitions (docs/lifecycle.md, "Partitions"; bridge.store.partition_moves): the
sessions stored before migration 0018 (the legacy partition) move into their day partitions while writers
keep committing batches to them and to new sessions; nothing is lost, nothing duplicated, every session
stored == what was written to it, each whole in its day partition, every chain verifies, and the legacy
partition is gone."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.config import Settings
from bridge.lifecycle import cli as lifecycle_cli
from bridge.store import partitions
from bridge.store.hash_chain import verify_chain
from bridge.store.partition_moves import migrate_to_partitions
from bridge.store.reads import AuditReader
from bridge.store.writes import BatchResult, EventStore
from tests.support.chat_events import RECEIVED_AT, batch, event_id
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

LEGACY_SESSIONS = [f"ses_legacy_{k:02d}" for k in range(12)]
NEW_SESSIONS = [f"ses_fresh_{k}" for k in range(3)]
BATCH = 5


class Writer:
    """Commits batches of BATCH events to one session until stopped; `written` is its last seq."""

    def __init__(self, store: EventStore, session_id: str, epoch: int, written: int) -> None:
        self.store, self.session_id, self.epoch, self.written = store, session_id, epoch, written
        self.batches = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            seqs = range(self.written + 1, self.written + 1 + BATCH)
            result = await self.store.write_batch(self.session_id, self.epoch, batch(*seqs, session_id=self.session_id),
                                                  RECEIVED_AT)
            assert isinstance(result, BatchResult) and result.inserted == BATCH, result
            self.written += BATCH
            self.batches += 1
            await asyncio.sleep(0)


async def _legacy_session(engine: AsyncEngine, store: EventStore, sid: str, days_ago: int) -> int:
    """A session as migration 0018 leaves one stored before it: its day the legacy day, its rows in the
    legacy partition; created `days_ago` days ago (set through the data)."""
    epoch, _ = await store.claim(sid, "owner-1")
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE chat_sessions SET session_day = :d, created_at = now() - "
                                "make_interval(days => :n) WHERE upstream = :u AND session_id = :s"),
                           {"d": partitions.LEGACY_DAY, "n": days_ago, "u": store.upstream, "s": sid})
    await store.write_batch(sid, epoch, batch(*range(1, 41), session_id=sid), RECEIVED_AT)
    return epoch


async def _partition_of(engine: AsyncEngine, upstream: str) -> dict[str, set[str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(text("SELECT session_id, tableoid::regclass::text FROM chat_session_events "
                                       "WHERE upstream = :u"), {"u": upstream})
        out: dict[str, set[str]] = {}
        for sid, rel in rows:
            out.setdefault(str(sid), set()).add(str(rel))
        return out


async def test_the_legacy_sessions_move_to_their_days_while_writers_keep_committing(
    engine: AsyncEngine, store: EventStore
) -> None:
    await partitions.ensure_partitions(engine)
    epochs = {sid: await _legacy_session(engine, store, sid, days_ago=k % 4) for k, sid in enumerate(LEGACY_SESSIONS)}
    assert set().union(*(await _partition_of(engine, store.upstream)).values()) == {partitions.LEGACY}
    writers = [Writer(store, sid, epochs[sid], 40) for sid in LEGACY_SESSIONS]
    for sid in NEW_SESSIONS:
        writers.append(Writer(store, sid, (await store.claim(sid, "owner-1"))[0], 0))
    tasks = [asyncio.create_task(w.run()) for w in writers]
    await wait_until(lambda: all(w.batches >= 2 for w in writers), timeout=30, message="writers never wrote")

    during = [w.batches for w in writers]
    report = await migrate_to_partitions(engine, store.upstream, page=2)
    moved_while = sum(w.batches for w in writers) - sum(during)
    after = [w.batches for w in writers]
    await wait_until(lambda: all(w.batches >= a + 2 for w, a in zip(writers, after, strict=True)), timeout=30,
                     message="writers stopped after the migration")
    for w in writers:
        w.stop.set()
    await asyncio.gather(*tasks)

    assert report.sessions == len(LEGACY_SESSIONS) and report.legacy_dropped and report.pages == 6
    assert moved_while > 0, "no batch committed while the sessions moved: the test proved nothing"
    for w in writers:  # nothing lost, nothing twice
        assert await stored_ids(store, w.session_id) == [(s, event_id(s, w.session_id))
                                                         for s in range(1, w.written + 1)], w.session_id
    where = await _partition_of(engine, store.upstream)
    today = partitions.utc_today()
    for k, sid in enumerate(LEGACY_SESSIONS):
        assert where[sid] == {partitions.partition_name(today - timedelta(days=k % 4))}, sid
    for sid in NEW_SESSIONS:
        assert where[sid] == {partitions.partition_name(today)}
    reader = AuditReader(engine, store.upstream)
    for w in writers:
        assert verify_chain(await reader.chain_rows(w.session_id)).ok, w.session_id
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT to_regclass(:n)"), {"n": partitions.LEGACY})).scalar() is None


async def test_the_command_says_what_it_moved_and_a_second_run_moves_nothing(
    engine: AsyncEngine, store: EventStore, database_url: str
) -> None:
    await _legacy_session(engine, store, "ses_legacy_cli", days_ago=1)

    def cli() -> str:
        out = io.StringIO()
        args = lifecycle_cli.argparse.Namespace(command="partition-migrate", page=10)
        assert lifecycle_cli.run(args, Settings(upstream_name=store.upstream), database_url, out) == 0
        return out.getvalue()

    first = await asyncio.to_thread(cli)
    assert '"sessions": 1' in first and '"rows": 40' in first and '"legacy_dropped": true' in first, first
    second = await asyncio.to_thread(cli)
    assert '"sessions": 0' in second and '"legacy_dropped": false' in second, second
    assert [s for s, _ in await stored_ids(store, "ses_legacy_cli")] == list(range(1, 41))
