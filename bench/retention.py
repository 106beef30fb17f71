"""A retention run at size (docs/lifecycle.md "Retention", BENCHMARKS.md): how long `opencode-bridge
retention` takes, how much WAL it writes, and what the write path sees meanwhile.

    python -m bench.retention --sessions 10000 --events 100        # 1 M rows, about half of them old

An embedded PostgreSQL (or BRIDGE_DATABASE_URL) is filled server-side (`generate_series`) with `--sessions`
sessions of `--events` events of ~1 KB (the stored size docs/scaling.md measured per event), each with a
last event 0 to 59 days ago (session i: i mod 60 days), so a 30-day retention removes about half. Then:

1. a probe writer commits batches of 20 events of the real tool turn (fixtures/, the bridge's own
   `EventStore.write_batch`) into fresh sessions, back to back, for `--probe-s` seconds: the baseline;
2. the same probe runs while `run_retention` (the CLI's code) removes the old sessions;
3. printed: the run's seconds, sessions and rows removed, WAL bytes written (`pg_current_wal_lsn` before
   and after), and the probe's batch commit latency p50 / p99 / max before and during.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.in_database import run_in_database
from bench.write_path_phases import frames
from bridge.events import normalize, parse_frame
from bridge.lifecycle.retention import run_retention
from bridge.log import configure_logging
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.partitions import ensure_partitions
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore

UPSTREAM = "bench-retention"

_FILL_SESSIONS = """
INSERT INTO chat_sessions (upstream, session_id, cursor_seq, first_event_at, last_event_at, created_at)
SELECT :u, 'ses_r' || lpad(i::text, 9, '0'), CAST(:events AS bigint), now() - make_interval(days => i % 60, hours => 1),
       now() - make_interval(days => i % 60), now() - make_interval(days => i % 60, hours => 1)
FROM generate_series(CAST(:lo AS int), CAST(:hi AS int)) i
"""
# `{day}`: the partition key column and its value (today's, the sessions' default day), or nothing on a
# table from before partitions (bench.partitions fills one to migrate it).
_FILL_EVENTS = """
INSERT INTO chat_session_events (upstream, session_id, seq, event_id, type, kind, event_time, received_at,
                                 payload{day_col})
SELECT :u, 'ses_r' || lpad(i::text, 9, '0'), s, 'evt_r' || i || '_' || s, 'session.next.text.ended', 'text',
       now() - make_interval(days => i % 60), now() - make_interval(days => i % 60),
       jsonb_build_object('id', 'evt_r' || i || '_' || s, 'type', 'session.next.text.ended',
                          'data', jsonb_build_object('sessionID', 'ses_r' || i,
                                                     'text', repeat('lorem ipsum ', 75))){day}
FROM generate_series(CAST(:lo AS int), CAST(:hi AS int)) i, generate_series(1, CAST(:events AS int)) s
"""


async def fill(engine: AsyncEngine, sessions: int, events: int, *, partitioned: bool = True) -> float:
    started = time.monotonic()
    day = (", ", ", ((now() AT TIME ZONE 'UTC'))::date") if partitioned else ("", "")
    fill_events = _FILL_EVENTS.format(day_col=day[0] + "session_day" if partitioned else "", day=day[1])
    step = max(1, 200_000 // events)
    for lo in range(1, sessions + 1, step):
        hi = min(sessions, lo + step - 1)
        async with engine.begin() as conn:
            await conn.execute(text(_FILL_SESSIONS), {"u": UPSTREAM, "lo": lo, "hi": hi, "events": events})
            await conn.execute(text(fill_events), {"u": UPSTREAM, "lo": lo, "hi": hi, "events": events})
    async with engine.connect() as conn:
        await conn.execute(text("COMMIT"))
        await conn.execute(text("VACUUM ANALYZE chat_session_events"))
        await conn.execute(text("VACUUM ANALYZE chat_sessions"))
    return time.monotonic() - started


async def probe(store: EventStore, stop: asyncio.Event, tag: str) -> list[float]:
    """Batch commit latencies (s) of a writer of 20-event batches until `stop`."""
    out: list[float] = []
    n = 0
    while not stop.is_set():
        sid = f"ses_probe_{tag}_{n:06d}"
        n += 1
        epoch, _ = await store.claim(sid, "probe")
        events = [normalize(parse_frame(f)) for f in frames(sid, 20)]
        t0 = time.perf_counter()
        await store.write_batch(sid, epoch, events, datetime.now(UTC))
        out.append(time.perf_counter() - t0)
    return out


def _summary(lat: list[float]) -> dict[str, Any]:
    if not lat:
        return {"batches": 0}
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else [lat[0]] * 99
    return {"batches": len(lat), "p50_ms": round(q[49] * 1000, 2), "p99_ms": round(q[98] * 1000, 2),
            "max_ms": round(max(lat) * 1000, 2)}


async def _lsn(engine: AsyncEngine) -> int:
    """The WAL insert position in bytes."""
    async with engine.connect() as conn:
        q = text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), CAST('0/0' AS pg_lsn))")
        return int((await conn.execute(q)).scalar_one())


async def run(url: str, sessions: int, events: int, days: int, probe_s: float, batch: int) -> dict[str, Any]:
    await upgrade_to_head(make_engine(url, pool_size=1))
    engine = make_engine(url, pool_size=4)
    try:
        await ensure_partitions(engine)
        fill_s = await fill(engine, sessions, events)
        store = EventStore(engine, "bench-probe")
        stop = asyncio.Event()
        base_task = asyncio.create_task(probe(store, stop, "base"))
        await asyncio.sleep(probe_s)  # a fixed measuring window, not a wait for a condition
        stop.set()
        baseline = await base_task
        stop = asyncio.Event()
        during_task = asyncio.create_task(probe(store, stop, "during"))
        before = await _lsn(engine)
        cutoff = datetime.now(UTC) - timedelta(days=days)
        report = await run_retention(engine, AuditReader(engine, UPSTREAM), UPSTREAM, cutoff, batch=batch)
        after = await _lsn(engine)
        stop.set()
        during = await during_task
        wal = after - before
        return {"sessions": sessions, "events_per_session": events, "rows_loaded": sessions * events,
                "fill_s": round(fill_s, 1), "retention_days": days, "batch_sessions": batch,
                "run_s": round(report.seconds, 2), "sessions_removed": report.sessions,
                "rows_removed": sum(report.rows.values()), "events_removed": report.rows["chat_session_events"],
                "events_per_s": round(report.rows["chat_session_events"] / max(report.seconds, 1e-9)),
                "wal_bytes": wal, "wal_bytes_per_event": round(wal / max(report.rows["chat_session_events"], 1)),
                "probe_before": _summary(baseline), "probe_during": _summary(during)}
    finally:
        await engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--probe-s", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=100, help="sessions per retention transaction")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    configure_logging("console", "warning")
    # the data directory goes after the run: 10 M rows are ~15 GB
    res = run_in_database(lambda url: run(url, a.sessions, a.events, a.days, a.probe_s, a.batch), remove=True)
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
