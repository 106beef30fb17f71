"""The write path against its physical limits, in one run and one database (numbers for BENCHMARKS.md).

What is driven: the store directly, the way followers drive it — per session, the `data:` texts of one
read (captured tool-turn events of `fixtures/opencode-1.18.33/b-tool-turn`, retargeted to the session,
~400 bytes each) are parsed and normalized (`parse_frame` → `normalize`, or `parse_envelope` for
`/history` items) and handed to the session's sink (`StoreSink` → `write_batch`, through the group
committer). The HTTP/SSE socket is not in the measurement (frame parsing is: `bench.ingest` covers it).

In the same run and database:
- ceiling: `COPY` of exactly those rows into a clone of `chat_session_events` (same indexes), one transaction
  (the median of three);
- naive mirror: one `INSERT` + cursor `UPDATE` + `COMMIT` per event on one connection (time-boxed);
- bridge: S sessions x N events burst (all sessions write at once, one write per 20-event read), the
  same burst's rows prepared beforehand and handed to the store at once (the store's own share),
  the catch-up of S sessions x N events from `/history` items, one long session's catch-up in pages,
  the quiet-session commit latency, and the replay of one long session (store read + event frames).

Usage: python -m bench.write_path [--sessions 1000] [--events 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import text

from bench.footprint import footprint
from bridge import metrics
from bridge.events import ChatEvent, normalize, parse_envelope, parse_frame
from bridge.fanout import protocol as p
from bridge.fanout.connection import WebSocketContext
from bridge.log import configure_logging
from bridge.perf import turnstile
from bridge.perf.runtime import GEN0_THRESHOLD, tune_gc
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from bridge.store.writes.rows import prepare_event
from bridge.upstream.responses import decode_json
from bridge.upstream.store_sink import StoreSink

TEMPLATE = Path("fixtures/opencode-1.18.33/b-tool-turn/durable.sse")
READ = 20  # events per follower read (one write() call)


def _templates() -> list[dict[str, Any]]:
    lines = TEMPLATE.read_text().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]


def frames(sid: str, n: int, start: int = 1) -> list[str]:
    """n wire frames (`data:` text) of session `sid`, seqs start..start+n-1, unique ids."""
    tpl = _templates()
    out = []
    for i in range(n):
        seq = start + i
        env = json.loads(json.dumps(tpl[i % len(tpl)]))
        env["id"] = f"evt_{sid[4:]}_{seq:07d}"
        env["durable"] = {"aggregateID": sid, "seq": seq, "version": env["durable"]["version"]}
        env["data"]["sessionID"] = sid
        out.append(json.dumps(env, separators=(",", ":"), ensure_ascii=False))
    return out


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _raw_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


# --- baselines ------------------------------------------------------------------------------------------

_COLUMNS = (
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
            out.append(tuple(row[c] for c in _COLUMNS))
    return out


async def copy_ceiling(url: str, rows: list[tuple[Any, ...]], runs: int = 3) -> tuple[float, list[float]]:
    """COPY of the rows into a fresh clone, `runs` times: (the median, every run). The median, because one
    COPY of 20,000 rows takes a third of a second and moves by ±20 % with the machine's other work."""
    con = await asyncpg.connect(_raw_url(url))
    rates = []
    try:
        for _ in range(runs):
            await con.execute("DROP TABLE IF EXISTS bench_copy_events; "
                              "CREATE TABLE bench_copy_events (LIKE chat_session_events INCLUDING ALL)")
            t0 = time.perf_counter()
            async with con.transaction():
                await con.copy_records_to_table("bench_copy_events", records=rows, columns=_COLUMNS)
            rates.append(len(rows) / (time.perf_counter() - t0))
        return statistics.median(rates), rates
    finally:
        await con.execute("DROP TABLE IF EXISTS bench_copy_events")
        await con.close()


async def naive_mirror(url: str, rows: list[tuple[Any, ...]], budget_s: float) -> float:
    """One INSERT + cursor UPDATE + COMMIT per event, one connection, until `budget_s` is spent."""
    con = await asyncpg.connect(_raw_url(url))
    cols = ", ".join(_COLUMNS)
    marks = ", ".join(f"${i + 1}" for i in range(len(_COLUMNS)))
    try:
        await con.execute("DROP TABLE IF EXISTS bench_naive_events, bench_naive_sessions; "
                          "CREATE TABLE bench_naive_events (LIKE chat_session_events INCLUDING ALL); "
                          "CREATE TABLE bench_naive_sessions (LIKE chat_sessions INCLUDING ALL)")
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


# --- the bridge ------------------------------------------------------------------------------------------

Writer = Callable[[str, int], Callable[[Sequence[ChatEvent], datetime], Awaitable[int]]]


def _writer(store: EventStore) -> Writer:
    def bind(sid: str, epoch: int) -> Callable[[Sequence[ChatEvent], datetime], Awaitable[int]]:
        return StoreSink(store, sid, epoch).write
    return bind


async def _claim_all(store: EventStore, sids: Sequence[str]) -> dict[str, int]:
    out = {}
    for sid in sids:
        out[sid], _ = await store.claim(sid, "bench")
    return out


async def _timed(coros: list[Awaitable[Any]], events: int) -> dict[str, float]:
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*coros)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"events_per_s": events / wall, "cpu_us_per_event": cpu / events * 1e6, "wall_s": wall}


async def burst(store: EventStore, write: Writer, tag: str, sessions: int, n: int) -> dict[str, float]:
    sids = [f"ses_{tag}{k:05d}" for k in range(sessions)]
    epochs = await _claim_all(store, sids)
    wire = {sid: frames(sid, n) for sid in sids}
    gate = turnstile.Turnstile()  # one for all the followers, as the daemon has it

    async def follower(sid: str) -> None:
        w = write(sid, epochs[sid])
        for read in chunks(wire[sid], READ):
            await gate.enter()  # as the follower does before a read's CPU work
            received = datetime.now(UTC)
            await w([normalize(parse_frame(f)) for f in read], received)

    return await _timed([follower(sid) for sid in sids], sessions * n)


async def store_only(store: EventStore, tag: str, sessions: int, n: int) -> dict[str, float]:
    """The burst's rows prepared beforehand and handed to the group committer at once: what the store's
    transaction (locks, anchors, COPY, link check, cursors) costs without the parsing in front of it."""
    sids = [f"ses_{tag}{k:05d}" for k in range(sessions)]
    epochs = await _claim_all(store, sids)
    now = datetime.now(UTC)
    writes = [store.prepare(sid, epochs[sid], [normalize(parse_frame(f)) for f in frames(sid, n)], now)
              for sid in sids]
    committer = store.committer
    assert committer is not None
    return await _timed([committer.submit(w) for w in writes], sessions * n)


def rows_by_path() -> dict[str, float]:
    return {path: metrics.REGISTRY.get_sample_value("bridge_group_commit_rows_total", {"path": path}) or 0.0
            for path in ("copy", "insert")}


async def catch_up(store: EventStore, write: Writer, tag: str, sessions: int, n: int) -> dict[str, float]:
    """S sessions' `/history` pages (a JSON body per page, decoded like the client does)."""
    sids = [f"ses_{tag}{k:05d}" for k in range(sessions)]
    epochs = await _claim_all(store, sids)
    pages = {sid: [f'{{"events":[{",".join(page)}],"hasMore":false}}'.encode() for page in chunks(frames(sid, n), 100)]
             for sid in sids}
    gate = turnstile.Turnstile()

    async def follower(sid: str) -> None:
        w = write(sid, epochs[sid])
        for page in pages[sid]:
            body = decode_json(page)
            await gate.enter()  # as the catch-up does before a page's CPU work
            received = datetime.now(UTC)
            await w([normalize(parse_envelope(item)) for item in body["events"]], received)

    return await _timed([follower(sid) for sid in sids], sessions * n)


async def long_catch_up(store: EventStore, write: Writer, n: int, page: int, in_flight: int) -> dict[str, float]:
    """One session's history of n events in pages; `in_flight` pages written concurrently (1 = today's
    follower: fetch, write, wait, fetch…; 2 = the next page parsed while the previous one commits)."""
    sid = f"ses_long{in_flight}_{uuid.uuid4().hex[:6]}"
    (epoch,) = (await _claim_all(store, [sid])).values()
    w = write(sid, epoch)
    pages = chunks(frames(sid, n), page)
    sem = asyncio.Semaphore(in_flight)
    prev: asyncio.Future[Any] | None = None

    async def one(fs: Sequence[str], before: asyncio.Future[Any] | None) -> None:
        async with sem:
            events = [normalize(parse_frame(f)) for f in fs]
            if before is not None and in_flight == 1:
                await before
            await w(events, datetime.now(UTC))

    cpu0, t0 = time.process_time(), time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for fs in pages:
            prev = tg.create_task(one(fs, prev))
            if in_flight == 1:
                await prev
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"events_per_s": n / wall, "cpu_us_per_event": cpu / n * 1e6, "session": sid}  # type: ignore[dict-item]


async def quiet_latency(store: EventStore, write: Writer, count: int) -> dict[str, float]:
    sid = f"ses_quiet_{uuid.uuid4().hex[:6]}"
    (epoch,) = (await _claim_all(store, [sid])).values()
    w = write(sid, epoch)
    lat = []
    for f in frames(sid, count):
        ev = [normalize(parse_frame(f))]
        t0 = time.perf_counter()
        await w(ev, datetime.now(UTC))
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[max(0, int(len(lat) * 0.99) - 1)]}


async def replay(engine: Any, upstream: str, sid: str, n: int, page: int = WebSocketContext.replay_page,
                 python: bool = False) -> dict[str, float]:
    """What a WebSocket replay does per event minus the socket: read pages of frames (PostgreSQL builds a
    v2 row's, bridge.store.reads.replay) — or, `python`, of stored rows to frame here (`event_frames`)."""
    fan = FanoutStore(engine, upstream)
    sent, after = 0, 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    while True:
        if python:
            rows: Any = await fan.events_after(sid, after, page)
            frames = p.event_frames(sid, rows)
        else:
            rows = await fan.frames_after(sid, after, page)
            frames = p.replay_frames(sid, rows)
        for seq, _frame in frames:
            sent += 1
            after = seq
        if len(rows) < page:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert sent == n, (sent, n)
    return {"events_per_s": n / wall, "cpu_us_per_event": cpu / n * 1e6}


async def run(url: str, sessions: int, n: int, naive_budget_s: float, long_n: int,
              gc_gen0: int = GEN0_THRESHOLD) -> dict[str, Any]:
    if gc_gen0:
        tune_gc(gc_gen0)  # as the daemon does first thing (bridge.perf.runtime)
    engine = make_engine(url)
    await upgrade_to_head(engine)
    store = EventStore(engine, f"bench-{uuid.uuid4().hex[:8]}")
    out: dict[str, Any] = {"sessions": sessions, "events_per_session": n, "gc_gen0": gc_gen0 or 700}
    try:
        async with engine.connect() as c:
            out["fsync"] = (await c.execute(text("SHOW fsync"))).scalar_one()
        per_session = {f"ses_c{k:05d}": frames(f"ses_c{k:05d}", n) for k in range(sessions)}
        rows = rows_of(store.upstream, per_session)
        out["copy_events_per_s"], out["copy_runs"] = await copy_ceiling(url, rows)
        out["naive_events_per_s"] = await naive_mirror(url, rows, naive_budget_s)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        async with store.group_commit():
            write = _writer(store)
            before = rows_by_path()
            out["burst"] = await burst(store, write, "b", sessions, n)
            out["burst"]["rows_by_copy"] = rows_by_path()["copy"] - before["copy"]
            out["store_only"] = await store_only(store, "s", sessions, n)
            out["burst_500x60"] = await burst(store, write, "w", sessions // 2, 3 * n)
            out["catch_up"] = await catch_up(store, write, "h", sessions, n)
            out["quiet"] = await quiet_latency(store, write, 100)
            seq1 = await long_catch_up(store, write, long_n, 100, 1)
            seq2 = await long_catch_up(store, write, long_n, 100, 2)
        out["long_catch_up_sequential"] = seq1
        out["long_catch_up_pipelined"] = seq2
        out["peak_rss_kib_growth_per_session"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / (sessions + sessions // 2 + sessions)
        out["replay"] = await replay(engine, store.upstream, str(seq1["session"]), long_n)
        out["replay_python_frames"] = await replay(engine, store.upstream, str(seq1["session"]), long_n, python=True)
        out["footprint"] = await footprint(engine)  # bytes per event on disk (docs/scaling.md)
    finally:
        await engine.dispose()
    out["burst_over_copy"] = out["burst"]["events_per_s"] / out["copy_events_per_s"]
    out["burst_over_naive"] = out["burst"]["events_per_s"] / out["naive_events_per_s"]
    out["catch_up_over_copy"] = out["catch_up"]["events_per_s"] / out["copy_events_per_s"]
    out["store_only_over_copy"] = out["store_only"]["events_per_s"] / out["copy_events_per_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--naive-seconds", type=float, default=8.0)
    ap.add_argument("--long", type=int, default=20000, help="events of the long session (catch-up, replay)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--gc-gen0", type=int, default=GEN0_THRESHOLD,
                    help="gen-0 threshold given to bridge.perf.runtime.tune_gc (0: CPython's defaults, untuned)")
    a = ap.parse_args()
    configure_logging("console", "warning")
    url = os.environ.get("BRIDGE_DATABASE_URL")
    pg = None
    if not url:
        from bridge.store.embedded import start_embedded

        pg = start_embedded(Path(tempfile.mkdtemp(prefix="bridge-bench-")))
        url = pg.url
    try:
        res = asyncio.run(run(url, a.sessions, a.events, a.naive_seconds, a.long, a.gc_gen0))
    finally:
        if pg is not None:
            pg.stop()
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(json.dumps(res, indent=2, default=str))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
