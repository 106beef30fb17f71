"""Ingest benchmark: durable events from a fake upstream (the captures' exact wire format) into a real
PostgreSQL through the real follower, supervisor sink and batch writer.

Scenarios, all measured in one run so that ratios are comparable (absolute times on shared 2-core
machines are noisy):
- catch-up:  N events already upstream; time to mirror them (the catch-up's one sync-log read).
- history catch-up: the same with the sync log over the client's body bound (a very long session), so
             the events come from /history pages of 100, from a fake upstream in its own process: the
             real follower with its one-page-ahead pipeline off and on, alternated twice in the same
             run (best of two each).
- burst:     the follower is caught up; N events appended as fast as possible; time until all stored,
             for BRIDGE_BATCH_MAX_EVENTS = 200 (adaptive group commit) and = 1 (one commit per event).
- trickle:   one event at a time, waiting for each to be stored: upstream commit -> our commit latency.
- sessions:  S sessions streaming at once (one burst each).

Usage: python -m bench.ingest [--events N] [--sessions S] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.in_database import run_in_database
from bridge.log import configure_logging
from bridge.perf.turnstile import Turnstile
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from bridge.upstream.store_sink import StoreSink
from tests.support.fake_upstream import FakeUpstream

TEXT = "The quick brown fox jumps over the lazy dog. " * 8  # ~360 bytes, a typical text.ended


async def _mirrored(store: EventStore, sid: str, n: int) -> None:
    while True:
        row = await store.get_session(sid)
        if row is not None and row.cursor_seq >= n:
            return
        await asyncio.sleep(0.005)


async def _append(fake: FakeUpstream, sid: str, i: int) -> None:
    await fake.append(sid, "session.next.text.ended",
                      {"assistantMessageID": f"msg_{i // 10}", "textID": f"text-{i}", "text": TEXT})


async def _follow(store: EventStore, client: UpstreamClient, sid: str, batch: int,
                  turnstile: Turnstile | None = None, **kw: Any) -> asyncio.Task[Any]:
    epoch, cursor = await store.claim(sid, "bench")
    f = DurableFollower(sid, client, StoreSink(store, sid, epoch), cursor, FollowerSettings(
        batch_max_events=batch, reconnect_min_s=0.01, reconnect_max_s=0.1, upstream="bench", **kw),
        FollowerHooks(turnstile=turnstile))
    return asyncio.create_task(f.run())


async def _stop(tasks: list[asyncio.Task[Any]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _serve_fake(sessions: list[str], events: int, conn: Any) -> None:
    """A fake upstream in its own process (like `opencode serve`, it serializes on another core)."""

    async def main() -> None:
        fake = FakeUpstream()
        await fake.start()
        for sid in sessions:
            fake.add_session(sid)
            for i in range(events):
                await _append(fake, sid, i)
        conn.send(fake.url)
        await asyncio.Event().wait()

    asyncio.run(main())


async def _history_catch_up(engine: Any, upstream: str, events: int) -> dict[str, Any]:
    """Catch-up through /history pages (sync log over the body bound), prefetch off vs on, against a
    fake upstream in another process (its own event ids: a store of its own)."""
    store = EventStore(engine, f"{upstream}-history")
    modes = (False, True, False, True)
    sids = [f"ses_history_{uuid.uuid4().hex[:8]}_{k}" for k in range(len(modes))]
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve_fake, args=(sids, events, child), daemon=True)
    proc.start()
    try:
        url = await asyncio.to_thread(parent.recv)
        best: dict[bool, float] = {}
        # A page of 100 events (~55 KB) fits, the sync log of `events` (~0.55 KB each) does not.
        async with UpstreamClient(url, max_body_bytes=min(256 * 1024, events * 300)) as client:
            for sid, prefetch in zip(sids, modes, strict=True):
                t0 = time.perf_counter()
                task = await _follow(store, client, sid, 200, history_prefetch=prefetch)
                await _mirrored(store, sid, events)
                best[prefetch] = min(best.get(prefetch, float("inf")), time.perf_counter() - t0)
                await _stop([task])
    finally:
        proc.terminate()
        proc.join()
    return {
        "history_catchup_serial_events_per_s": events / best[False],
        "history_catchup_pipelined_events_per_s": events / best[True],
        "history_catchup_pipelined_over_serial": best[False] / best[True],
    }


async def run(database_url: str, events: int, sessions: int) -> dict[str, Any]:
    engine = make_engine(database_url)
    await upgrade_to_head(engine)
    store = EventStore(engine, f"bench-{uuid.uuid4().hex[:8]}")
    fake = FakeUpstream()
    await fake.start()
    out: dict[str, Any] = {}
    try:
        async with UpstreamClient(fake.url) as client:
            # catch-up
            sid = "ses_catchup"
            fake.add_session(sid)
            for i in range(events):
                await _append(fake, sid, i)
            t0 = time.perf_counter()
            task = await _follow(store, client, sid, 200)
            await _mirrored(store, sid, events)
            out["catchup_events_per_s"] = events / (time.perf_counter() - t0)
            await _stop([task])
            out.update(await _history_catch_up(engine, store.upstream, events))

            # burst, adaptive batches vs one event per transaction
            for batch in (200, 1):
                sid = f"ses_burst_{batch}"
                fake.add_session(sid)
                task = await _follow(store, client, sid, batch)
                await asyncio.sleep(0.2)  # let it connect and park on the empty stream
                t0 = time.perf_counter()
                for i in range(events):
                    await _append(fake, sid, i)
                await _mirrored(store, sid, events)
                out[f"burst_batch{batch}_events_per_s"] = events / (time.perf_counter() - t0)
                await _stop([task])

            # trickle: per-event latency, upstream commit -> our commit
            sid = "ses_trickle"
            fake.add_session(sid)
            task = await _follow(store, client, sid, 200)
            await asyncio.sleep(0.2)
            lat: list[float] = []
            for i in range(min(events, 300)):
                t0 = time.perf_counter()
                await _append(fake, sid, i)
                await _mirrored(store, sid, i + 1)
                lat.append((time.perf_counter() - t0) * 1000)
            await _stop([task])
            lat.sort()
            out["trickle_latency_ms_p50"] = statistics.median(lat)
            out["trickle_latency_ms_p99"] = lat[int(len(lat) * 0.99) - 1]

            # many sessions at once
            sids = [f"ses_multi_{k}" for k in range(sessions)]
            tasks = []
            shared = Turnstile()  # one for all the followers, as the daemon has it
            for sid in sids:
                fake.add_session(sid)
                tasks.append(await _follow(store, client, sid, 200, turnstile=shared))
            await asyncio.sleep(0.3)
            per = max(1, events // sessions)
            t0 = time.perf_counter()
            for i in range(per):
                for sid in sids:
                    await _append(fake, sid, i)
            await asyncio.gather(*(_mirrored(store, sid, per) for sid in sids))
            out["multi_sessions"] = sessions
            out["multi_events_per_s"] = per * sessions / (time.perf_counter() - t0)
            await _stop(tasks)

            async with engine.connect() as c:
                out["rows_stored"] = (await c.execute(text(
                    "select count(*) from chat_session_events where upstream = :u"), {"u": store.upstream})
                ).scalar_one()
    finally:
        await fake.stop()
        await engine.dispose()
    out["batch200_over_batch1"] = out["burst_batch200_events_per_s"] / out["burst_batch1_events_per_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    configure_logging("console", "warning")
    res = run_in_database(lambda url: run(url, a.events, a.sessions))
    for k, v in res.items():
        print(f"{k:32s} {v:.2f}" if isinstance(v, float) else f"{k:32s} {v}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
