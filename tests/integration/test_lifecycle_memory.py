"""Memory per warm session, measured: N sessions warmed and followed (durable stream open, in-memory turn
state) against a fake upstream running in another process, so only the bridge side is counted.

    .venv/bin/pytest -q -s tests/integration/test_lifecycle_memory.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import tracemalloc
from dataclasses import replace
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.config import Settings
from bridge.perf.runtime import tune_gc
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.waiting import wait_until

N = 300
REPO = Path(__file__).resolve().parents[2]
SERVE = f"""
import asyncio
from tests.support.fake_upstream import FakeUpstream

async def main():
    f = FakeUpstream()
    await f.start()
    for i in range({N}):
        sid = f"ses_{{i:05d}}"
        f.add_session(sid)
        data = {{"messageID": "m", "prompt": {{"text": "hi"}}}}
        await f.append(sid, "session.next.prompt.admitted", data, live=False)
        await f.append(sid, "session.next.prompted", data, live=False)
    print(f.port, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_memory_per_warm_session_is_small(engine: AsyncEngine) -> None:
    threshold = gc.get_threshold()
    try:
        await _measure(engine)
    finally:  # the daemon's GC tuning is process-wide: give the other tests CPython's defaults back
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def _measure(engine: AsyncEngine) -> None:
    tune_gc()  # the collector as the daemon tunes it, first thing (bridge.perf.runtime)
    serve = await asyncio.create_subprocess_exec(sys.executable, "-c", SERVE, cwd=REPO, stdout=subprocess.PIPE)
    try:
        assert serve.stdout is not None
        port = int(await asyncio.wait_for(serve.stdout.readline(), 60))
        store = EventStore(engine, "mem")
        settings = replace(Settings(upstream_name="mem"), active_poll_idle_s=60.0)
        async with UpstreamClient(f"http://127.0.0.1:{port}") as client:
            sup = FollowerSupervisor(store, client, settings, "host:1:mem")
            task = asyncio.create_task(sup.run())
            await wait_until(lambda: sup.running, 10, 0.01)
            # Warm one first so that imports, pools and caches are not counted per session.
            sup.warm("ses_00000")
            await wait_until(lambda: _mirrored(store, ["ses_00000"]), 30, 0.05)
            gc.collect()
            tracemalloc.start()
            rss0, (py0, _) = rss_bytes(), tracemalloc.get_traced_memory()
            sids = [f"ses_{i:05d}" for i in range(1, N)]
            for sid in sids:
                sup.warm(sid)
            await wait_until(lambda: _mirrored(store, sids), 120, 0.2, message="all warm and caught up")
            gc.collect()
            rss1, (py1, _) = rss_bytes(), tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert len(sup.warm_sessions()) == N
            per_py = (py1 - py0) / len(sids)
            per_rss = (rss1 - rss0) / len(sids)
            print(f"\n{len(sids)} warm sessions: Python heap +{per_py / 1024:.1f} KiB/session (tracemalloc), "
                  f"RSS +{per_rss / 1024:.1f} KiB/session")
            assert per_py < 256 * 1024
            sup.stop()
            await asyncio.wait_for(task, 30)
    finally:
        serve.kill()
        await serve.wait()


async def _mirrored(store: EventStore, sids: list[str]) -> bool:
    rows = {r.session_id: r.cursor_seq for r in await store.sessions()}
    return all(rows.get(sid) == 2 for sid in sids)
