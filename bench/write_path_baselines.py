"""The write path's two baselines (bench.write_path, bench.wire_measure), measured on the same rows and
database as the bridge: the ceiling, `COPY` into a clone of `chat_session_events` (same indexes) in one
transaction, and the naive mirror, one `INSERT` + cursor `UPDATE` + `COMMIT` per event on one connection."""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

from bridge.events import normalize, parse_frame
from bridge.store.writes.rows import prepare_event

COLUMNS = (
    "upstream", "session_id", "seq", "event_id", "type", "kind", "schema_version", "event_time", "received_at",
    "message_id", "assistant_message_id", "part_id", "call_id", "tool_name", "error_type", "error_message",
    "finish", "tokens_input", "tokens_output", "tokens_reasoning", "tokens_cache_read", "tokens_cache_write",
    "cost", "delivery", "agent", "model_id", "provider_id", "payload", "payload_lossy",
)


def rows_of(upstream: str, per_session: dict[str, list[str]]) -> list[tuple[Any, ...]]:
    now = datetime.now(UTC)
    out = []
    for sid, fs in per_session.items():
        for f in fs:
            row = dict(prepare_event(upstream, sid, normalize(parse_frame(f)), now).row)
            row["payload"] = json.dumps(row["payload"], ensure_ascii=False)
            out.append(tuple(row[c] for c in COLUMNS))
    return out


# The clone is one day's partition of the table (docs/lifecycle.md, "Partitions"): every row of today.
_ONE_DAY = "ALTER TABLE {} ALTER COLUMN session_day SET DEFAULT ((now() AT TIME ZONE 'UTC'))::date"


async def copy_ceiling(url: str, rows: list[tuple[Any, ...]], runs: int = 3) -> tuple[float, list[float]]:
    """COPY of the rows into a fresh clone, `runs` times: (the median, every run). The median, because one
    COPY of 20,000 rows takes a third of a second and moves by ±20 % with the machine's other work."""
    con = await asyncpg.connect(_raw_url(url))
    rates = []
    try:
        for _ in range(runs):
            await con.execute("DROP TABLE IF EXISTS bench_copy_events; "
                              "CREATE TABLE bench_copy_events (LIKE chat_session_events INCLUDING ALL); "
                              + _ONE_DAY.format("bench_copy_events"))
            t0 = time.perf_counter()
            async with con.transaction():
                await con.copy_records_to_table("bench_copy_events", records=rows, columns=COLUMNS)
            rates.append(len(rows) / (time.perf_counter() - t0))
        return statistics.median(rates), rates
    finally:
        await con.execute("DROP TABLE IF EXISTS bench_copy_events")
        await con.close()


async def naive_mirror(url: str, rows: list[tuple[Any, ...]], budget_s: float) -> float:
    """One INSERT + cursor UPDATE + COMMIT per event, one connection, until `budget_s` is spent."""
    con = await asyncpg.connect(_raw_url(url))
    cols = ", ".join(COLUMNS)
    marks = ", ".join(f"${i + 1}" for i in range(len(COLUMNS)))
    try:
        await con.execute("DROP TABLE IF EXISTS bench_naive_events, bench_naive_sessions; "
                          "CREATE TABLE bench_naive_events (LIKE chat_session_events INCLUDING ALL); "
                          "CREATE TABLE bench_naive_sessions (LIKE chat_sessions INCLUDING ALL); "
                          + _ONE_DAY.format("bench_naive_events"))
        await con.executemany("INSERT INTO bench_naive_sessions (upstream, session_id) VALUES ($1, $2) "
                              "ON CONFLICT DO NOTHING", sorted({(r[0], r[1]) for r in rows}))
        done = 0
        t0 = time.perf_counter()
        for r in rows:
            async with con.transaction():
                await con.execute(f"INSERT INTO bench_naive_events ({cols}) VALUES ({marks})", *r)
                await con.execute("UPDATE bench_naive_sessions SET cursor_seq = $3 WHERE upstream = $1 "
                                  "AND session_id = $2", r[0], r[1], r[2])
            done += 1
            if time.perf_counter() - t0 > budget_s:
                break
        return done / (time.perf_counter() - t0)
    finally:
        await con.execute("DROP TABLE IF EXISTS bench_naive_events, bench_naive_sessions")
        await con.close()


def _raw_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")
