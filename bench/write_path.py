"""The write path against its physical limits, in one run and one database (numbers for BENCHMARKS.md).

What is driven: the store directly, the way followers drive it — per session, the `data:` texts of one
read (captured tool-turn events of `fixtures/opencode-1.18.33/b-tool-turn`, retargeted to the session,
~400 bytes each) are parsed and normalized (`parse_frame` → `normalize`, or `parse_envelope` for
`/history` items) and handed to the session's sink (`StoreSink` → `write_batch`, through the group
committer). The HTTP/SSE socket is not in the measurement (frame parsing is: `bench.ingest` covers it).

In the same run and database:
- ceiling (bench/write_path_baselines.py): `COPY` of exactly those rows into a clone of
  `chat_session_events` (same indexes), one transaction (the median of three);
- naive mirror (the same module): one `INSERT` + cursor `UPDATE` + `COMMIT` per event on one connection
  (time-boxed);
- bridge (bench/write_path_phases.py): S sessions x N events burst (all sessions write at once, one write
  per 20-event read), the same burst's rows prepared beforehand and handed to the store at once (the
  store's own share), the catch-up of S sessions x N events from `/history` items, one long session's
  catch-up in pages, the quiet-session commit latency, and the replay of one long session (store read +
  event frames).

Usage: python -m bench.write_path [--sessions 1000] [--events 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.footprint import footprint
from bench.in_database import run_in_database
from bench.write_path_baselines import copy_ceiling, naive_mirror, rows_of
from bench.write_path_phases import (
    burst,
    catch_up,
    frames,
    long_catch_up,
    quiet_latency,
    replay,
    rows_by_path,
    store_only,
    writer,
)
from bridge.log import configure_logging
from bridge.perf.runtime import GEN0_THRESHOLD, tune_gc
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.writes import EventStore


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
            write = writer(store)
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
    res = run_in_database(lambda url: run(url, a.sessions, a.events, a.naive_seconds, a.long, a.gc_gen0))
    print(json.dumps(res, indent=2, default=str))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
