"""CPU of warm idle sessions (numbers for docs/mirror.md): N sessions warmed by a `FollowerSupervisor` with
the default settings against the fake serve, caught up, then left idle; the process's CPU over `--seconds`
(the fake serve runs in the same process: its idle durable streams cost nothing), and optionally a
cProfile of that idle window (`--profile`, the top functions by own time).

Usage: python -m bench.idle_cpu [--sessions 1000] [--seconds 20] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import resource
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    configure_logging("console", "warning")
    from bridge.store.embedded import start_embedded

    pg = start_embedded(Path(tempfile.mkdtemp(prefix="bridge-idle-")))
    try:
        asyncio.run(run(pg.url, a.sessions, a.seconds, a.profile))
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
