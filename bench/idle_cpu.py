"""CPU of warm idle sessions (numbers for docs/mirror.md): N sessions warmed by a `FollowerSupervisor` with
the default settings against the fake serve, caught up, then left idle; the process's CPU over `--seconds`
(the fake serve runs in the same process: its idle durable streams cost nothing), and optionally a
cProfile of that idle window (`--profile`, the top functions by own time).

With `--workers 1,2`: the whole daemon as an operator runs it instead (`opencode-bridge run` with
`BRIDGE_WORKERS` = each count in turn, against the fake serve of bench.wire, `--sessions` x 2 events, then idle
for `--seconds` after a 60 s settle, then a burst of 2 a session; bench.wire_workers): the CPU of the whole
worker set (parent and workers) with every session warm, per count.

Usage: python -m bench.idle_cpu [--sessions 1000] [--seconds 20] [--profile] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

from bridge.config import Settings
from bridge.log import configure_logging
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.writes.event_store import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run(url: str, n: int, seconds: float, profile: bool) -> None:
    fake = FakeUpstream()
    await fake.start()
    engine = make_engine(url)
    await upgrade_to_head(engine)
    store = EventStore(engine, "bench:idle")
    try:
        sids = [f"ses_{k:026d}" for k in range(n)]
        for sid in sids:
            fake.add_session(sid)
            await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "m", "textID": "t",
                                                               "text": "x"}, live=False)
        async with UpstreamClient(fake.url) as client:
            sup = FollowerSupervisor(store, client, Settings(upstream_name="bench:idle"), "owner-1")
            async with sup.started():
                t0 = time.perf_counter()
                for sid in sids:
                    sup.warm(sid, reason="listed")

                def streaming() -> bool:  # every follower caught up and on its durable stream
                    followers = [f for f in map(sup.follower, sids) if f is not None]
                    return len(followers) == n and all(f.connected.is_set() or fake.durable_requests(f.session_id)
                                                       for f in followers)

                await wait_until(streaming, 3600, 0.2, message="every session warm")
                warm_s = time.perf_counter() - t0
                # the status writes of the warm-up (one transaction each) done, then a moment of quiet
                await wait_until(lambda: sup.activity._writes.empty(), 3600, 0.2, message="status writes done")
                await asyncio.sleep(5.0)
                prof = cProfile.Profile() if profile else None
                c0, w0 = _cpu(), time.perf_counter()
                if prof is not None:
                    prof.enable()
                await asyncio.sleep(seconds)
                if prof is not None:
                    prof.disable()
                cpu, wall = _cpu() - c0, time.perf_counter() - w0
                print(f"{n} warm idle sessions: warm-up {warm_s:.1f} s ({fake.sync_calls} sync calls, "
                      f"{fake.history_calls} /history calls); idle CPU {100 * cpu / wall:.2f} % of a core "
                      f"over {wall:.0f} s")
                if prof is not None:
                    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    finally:
        await engine.dispose()
        await fake.stop()


def whole_daemon(sessions: int, seconds: float, counts: list[int], settle: float = 60.0) -> int:
    """Idle CPU of the whole worker set, per `BRIDGE_WORKERS` count (bench.wire_workers); 0 when every run's
    stored rows equal the upstream's."""
    from bench.wire_workers import runs, table

    # A settle of a minute: the warm-up's tail (statuses, the poller, a worker's deferred claims) is not idleness.
    results = runs(counts, 1, ["--sessions", str(sessions), "--events", "2", "--burst", "2", "--settle-seconds",
                               str(settle), "--idle-seconds", str(seconds), "--naive-seconds", "1"])[0]
    print(table([results]))
    for res in results:
        idle = res.get("idle", {})
        print(f"idle CPU, {res.get('warm_sessions', 0):,.0f} warm sessions, BRIDGE_WORKERS={res['workers']}: "
              f"{idle.get('cpu_percent_of_a_core', float('nan')):.2f} % of a core for the whole set "
              f"(settle before: {res.get('settle_cpu_percent', float('nan')):.1f} %), load {res['load'][1]:.1f}")
    return 0 if all(res["rc"] == 0 for res in results) else 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--workers", help="BRIDGE_WORKERS counts (1,2): the whole daemon, the set's CPU")
    a = ap.parse_args()
    if a.workers:
        sys.exit(whole_daemon(a.sessions, a.seconds, [int(w) for w in a.workers.split(",") if w]))
    configure_logging("console", "warning")
    from bridge.store.embedded import start_embedded

    pg = start_embedded(Path(tempfile.mkdtemp(prefix="bridge-idle-")))
    try:
        asyncio.run(run(pg.url, a.sessions, a.seconds, a.profile))
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
