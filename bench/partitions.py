"""The migration to partitions and retention by partition, at size (docs/lifecycle.md, "Partitions";
BENCHMARKS.md, "Partitions").

    python -m bench.partitions --sessions 20000 --events 100        # 2 M rows, session days over 60 days

An embedded PostgreSQL at migration 0017 (today's table before partitions), filled as bench.retention fills
it (sessions created 0 to 59 days ago, session i: i mod 60). Then, each measured in seconds and WAL bytes:

1. migration 0018 (`upgrade_to_head`): the old table becomes the legacy partition; its two unique keys are
   built again with `session_day` (the bridge is stopped for this step);
2. `opencode-bridge partition-migrate`'s code (`migrate_to_partitions`) moves every session to its day
   partition while a probe writer commits 20-event batches into new sessions (bench.retention's probe):
   its batch commit latency before and during;
3. retention at 30 days in the same database: one session of each of 15 old days is made warm, so those
   days keep their partition and their other sessions leave by `DELETE`; the other old days are dropped
   whole (`DETACH`, `DROP`). Each path's seconds, WAL and events, with the probe running, each after a
   `VACUUM ANALYZE` and a `CHECKPOINT` (WAL is the whole server's: autovacuum after the move would count).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.retention import UPSTREAM, _lsn, _summary, fill, probe
from bridge.lifecycle.retention import RetentionReport, _drop_days, run_retention
from bridge.log import configure_logging
from bridge.store.db import downgrade_to, make_engine, upgrade_to_head
from bridge.store.partition_moves import migrate_to_partitions
from bridge.store.partitions import ensure_partitions
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore

RETENTION_DAYS = 30
# Days 31..45: one session each held warm (a live lease), so these days cannot leave whole.
_WARM = text("""
UPDATE chat_sessions SET lease_owner = 'bench', lease_expires_at = now() + interval '1 hour'
WHERE upstream = :u AND session_id IN (SELECT 'ses_r' || lpad(i::text, 9, '0') FROM generate_series(31, 45) i)
""")


async def _measured(engine: AsyncEngine, work: Any) -> tuple[Any, float, int, list[float]]:
    """`await work()` with a probe writer running: (its result, seconds, WAL bytes, probe latencies)."""
    store, stop = EventStore(engine, "bench-probe"), asyncio.Event()
    task = asyncio.create_task(probe(store, stop, f"w{time.monotonic_ns()}"))
    before, t0 = await _lsn(engine), time.monotonic()
    result = await work()
    seconds, wal = time.monotonic() - t0, await _lsn(engine) - before
    stop.set()
    return result, seconds, wal, await task


async def _settle(engine: AsyncEngine) -> None:
    """VACUUM ANALYZE and a CHECKPOINT: what follows starts from the same state (first change of a page
    after a checkpoint logs the whole page, for both retention paths alike)."""
    async with engine.connect() as conn:
        await conn.execute(text("COMMIT"))
        await conn.execute(text("VACUUM ANALYZE chat_session_events"))
        await conn.execute(text("VACUUM ANALYZE chat_sessions"))
        await conn.execute(text("CHECKPOINT"))


async def run(url: str, sessions: int, events: int, probe_s: float) -> dict[str, Any]:
    engine = make_engine(url, pool_size=4)
    try:
        await upgrade_to_head(engine)
        await downgrade_to(engine, "0017")
        fill_s = await fill(engine, sessions, events, partitioned=False)
        before, t0 = await _lsn(engine), time.monotonic()
        await upgrade_to_head(engine)
        upgrade_s, upgrade_wal = time.monotonic() - t0, await _lsn(engine) - before
        await ensure_partitions(engine)
        _, _, _, baseline = await _measured(engine, lambda: asyncio.sleep(probe_s))  # a fixed window
        moved, move_s, move_wal, move_probe = await _measured(
            engine, lambda: migrate_to_partitions(engine, UPSTREAM, page=50))
        async with engine.begin() as conn:
            await conn.execute(_WARM, {"u": UPSTREAM})
        await _settle(engine)  # the move's own aftermath (autovacuum) kept out of the two paths' WAL
        cutoff = datetime.now(UTC) - timedelta(days=RETENTION_DAYS)
        reader = AuditReader(engine, UPSTREAM)
        dropped = RetentionReport(cutoff, False)
        _, drop_s, drop_wal, drop_probe = await _measured(
            engine, lambda: _drop_days(engine, reader, UPSTREAM, cutoff, None, dropped))
        await _settle(engine)
        deleted, delete_s, delete_wal, delete_probe = await _measured(
            engine, lambda: run_retention(engine, reader, UPSTREAM, cutoff))
        drop_events, delete_events = dropped.rows["chat_session_events"], deleted.rows["chat_session_events"]
        return {
            "rows": sessions * events, "fill_s": round(fill_s, 1),
            "migration_0018_s": round(upgrade_s, 1), "migration_0018_wal_bytes": upgrade_wal,
            "partition_migrate": {**moved.fields(), "rows_per_s": round(moved.rows / max(move_s, 1e-9)),
                                  "wal_bytes": move_wal, "wal_bytes_per_row": round(move_wal / max(moved.rows, 1))},
            "retention_drop": {"days": len(dropped.days_dropped), "sessions": dropped.sessions,
                               "events": drop_events, "s": round(drop_s, 2), "wal_bytes": drop_wal,
                               "wal_bytes_per_event": round(drop_wal / max(drop_events, 1), 2)},
            "retention_delete": {"sessions": deleted.sessions, "events": delete_events, "s": round(delete_s, 2),
                                 "wal_bytes": delete_wal,
                                 "wal_bytes_per_event": round(delete_wal / max(delete_events, 1), 2)},
            "probe_before": _summary(baseline), "probe_during_migrate": _summary(move_probe),
            "probe_during_drop": _summary(drop_probe), "probe_during_delete": _summary(delete_probe),
        }
    finally:
        await engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--probe-s", type=float, default=10.0)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    configure_logging("console", "warning")
    from bridge.store.embedded import start_embedded

    data = Path(tempfile.mkdtemp(prefix="bridge-bench-"))
    pg = start_embedded(data)
    try:
        res = asyncio.run(run(pg.url, a.sessions, a.events, a.probe_s))
    finally:
        pg.stop()
        shutil.rmtree(data, ignore_errors=True)
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
