"""Time partitions of `chat_session_events`, measured before they are built (docs/lifecycle.md,
"Partitions (designed, not built)"): what the copy into a partitioned table costs, what retention by
`DROP` of a day costs next to the `DELETE` of bench.retention, and what the planner does with the bridge's
per-session queries when they do not name the partition key.

    python -m bench.partitions --sessions 20000 --events 100        # 2 M rows over 60 session days

An embedded PostgreSQL filled as bench.retention fills it; then, beside `chat_session_events`, a twin
`chat_session_events_p` with a `session_day date` column (the day of the session's first event, from
`chat_sessions.first_event_at`), `PARTITION BY RANGE (session_day)`, one partition a day and a default,
primary key `(upstream, session_id, seq, session_day)` and today's secondary indexes. Printed: the copy's
seconds and WAL, the `DETACH … ; DROP TABLE` of the 30 oldest days (seconds, WAL, rows gone), and for a
session's `seq > n` read the number of partitions the plan touches with and without `session_day`.
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
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from bench.retention import UPSTREAM, _lsn, fill
from bridge.log import configure_logging
from bridge.store.db import make_engine, upgrade_to_head

DAYS = 60


def _ddl(today: str) -> list[str]:
    out = [
        "CREATE TABLE chat_session_events_p (LIKE chat_session_events INCLUDING DEFAULTS, session_day date NOT NULL)"
        " PARTITION BY RANGE (session_day)",
        "ALTER TABLE chat_session_events_p ADD PRIMARY KEY (upstream, session_id, seq, session_day)",
        "CREATE INDEX ON chat_session_events_p (upstream, session_id, event_time)",
        "CREATE INDEX ON chat_session_events_p (event_time)",
        "CREATE INDEX ON chat_session_events_p (kind)",
        "CREATE TABLE chat_session_events_p_default PARTITION OF chat_session_events_p DEFAULT",
    ]
    for d in range(DAYS + 1):
        out.append(f"CREATE TABLE chat_session_events_p_{d:03d} PARTITION OF chat_session_events_p FOR VALUES "
                   f"FROM (DATE '{today}' - {d}) TO (DATE '{today}' - {d} + 1)")
    return out


_COPY = """
INSERT INTO chat_session_events_p
SELECT e.*, CAST(s.first_event_at AT TIME ZONE 'UTC' AS date)
FROM chat_session_events e JOIN chat_sessions s USING (upstream, session_id)
"""


async def _partitions_in_plan(conn: AsyncConnection, sql: str, params: dict[str, Any]) -> int:
    plan = (await conn.execute(text("EXPLAIN (FORMAT JSON) " + sql), params)).scalar_one()
    found: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        if "Relation Name" in node:
            found.add(str(node["Relation Name"]))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return len({r for r in found if r.startswith("chat_session_events_p")})


async def run(url: str, sessions: int, events: int) -> dict[str, Any]:
    await upgrade_to_head(make_engine(url, pool_size=1))
    engine = make_engine(url, pool_size=2)
    try:
        fill_s = await fill(engine, sessions, events)
        async with engine.connect() as conn:
            today = str((await conn.execute(text("SELECT CAST(now() AT TIME ZONE 'UTC' AS date)"))).scalar_one())
        async with engine.begin() as conn:
            for stmt in _ddl(today):
                await conn.execute(text(stmt))
        before, t0 = await _lsn(engine), time.monotonic()
        async with engine.begin() as conn:
            copied = (await conn.execute(text(_COPY))).rowcount
        copy_s, copy_wal = time.monotonic() - t0, await _lsn(engine) - before
        async with engine.connect() as conn:
            await conn.execute(text("COMMIT"))
            await conn.execute(text("VACUUM ANALYZE chat_session_events_p"))
            sid = "ses_r" + "1".zfill(9)
            q = "SELECT seq FROM chat_session_events_p WHERE upstream = :u AND session_id = :s AND seq > 10"
            day = "SELECT CAST(first_event_at AT TIME ZONE 'UTC' AS date) FROM chat_sessions WHERE session_id = :s"
            d = (await conn.execute(text(day), {"s": sid})).scalar_one()
            without = await _partitions_in_plan(conn, q, {"u": UPSTREAM, "s": sid})
            with_day = await _partitions_in_plan(conn, q + " AND session_day = :d", {"u": UPSTREAM, "s": sid, "d": d})
        old = [f"chat_session_events_p_{n:03d}" for n in range(31, DAYS + 1)]
        async with engine.connect() as conn:
            rows_old = 0
            for name in old:
                rows_old += int((await conn.execute(text(f"SELECT count(*) FROM {name}"))).scalar_one())
        before, t0 = await _lsn(engine), time.monotonic()
        for name in old:
            async with engine.begin() as conn:
                await conn.execute(text(f"ALTER TABLE chat_session_events_p DETACH PARTITION {name}"))
                await conn.execute(text(f"DROP TABLE {name}"))
        drop_s, drop_wal = time.monotonic() - t0, await _lsn(engine) - before
        return {"rows": sessions * events, "fill_s": round(fill_s, 1), "copy_rows": copied,
                "copy_s": round(copy_s, 1), "copy_rows_per_s": round(copied / max(copy_s, 1e-9)),
                "copy_wal_bytes": copy_wal, "drop_days": len(old), "drop_rows": rows_old,
                "drop_s": round(drop_s, 2), "drop_wal_bytes": drop_wal,
                "partitions_read_without_session_day": without, "partitions_read_with_session_day": with_day}
    finally:
        await engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--events", type=int, default=100)
    a = ap.parse_args()
    configure_logging("console", "warning")
    from bridge.store.embedded import start_embedded

    data = Path(tempfile.mkdtemp(prefix="bridge-bench-"))
    pg = start_embedded(data)
    try:
        res = asyncio.run(run(pg.url, a.sessions, a.events))
    finally:
        pg.stop()
        shutil.rmtree(data, ignore_errors=True)
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
