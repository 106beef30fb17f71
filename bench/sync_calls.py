"""Sync-log repair of many sessions at once: upstream calls and bytes (numbers for docs/mirror.md).

What is driven: one `UpstreamClient` against the fake serve (tests/support/fake_upstream.py, which answers
`POST /sync/history` like the real one: named aggregates after their cutoff, the others whole), S sessions
of E legacy events each, every session known to the client (listed), and one `sync_history(sid, cursor)`
per session at once — what a warm-up's catch-ups or a `/global/event` reconnect's repairs ask. No database.

- batched: the client as shipped (bridge.upstream.sync_batch);
- per session: the same client with one session per call, no gathering and every known session named
  (what the bridge did before; its calls are measured on the first `--sample` sessions when S is large,
  since each one makes the fake scan every session).

Usage: python -m bench.sync_calls [--sessions 1000] [--events 2] [--sample 300]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Mapping
from typing import Any

from bridge.upstream.client import ClientLimits, UpstreamClient
from bridge.upstream.sync_answer import SyncAnswer
from bridge.upstream.sync_batch import BatchSettings
from tests.support.fake_upstream import FakeUpstream

PER_SESSION = BatchSettings(max_sessions=1, window_s=0.0, gather_max_s=0.0, max_named=1 << 30, riders=False)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _run(fake: FakeUpstream, sids: list[str], cursor: int, sync_batch: BatchSettings | None) -> dict[str, Any]:
    async with UpstreamClient(fake.url, limits=ClientLimits(sync_batch=sync_batch or BatchSettings())) as client:
        await client.list_sessions()
        answered = [0]
        post = client._post_sync

        async def counted(cutoffs: dict[str, int], keep: Mapping[str, int]) -> SyncAnswer:
            answer = await post(cutoffs, keep)
            answered[0] += answer.answered
            return answer

        client.sync_batcher._post = counted
        calls, sent = fake.sync_calls, fake.sync_request_bytes
        t0, c0 = time.perf_counter(), _cpu()
        got = await asyncio.gather(*(client.sync_history(sid, cursor) for sid in sids))
        took, cpu = time.perf_counter() - t0, _cpu() - c0
    events = sum(len(g) for g in got)
    n_calls = fake.sync_calls - calls
    return {"sessions": len(sids), "events": events, "calls": n_calls, "request_bytes": fake.sync_request_bytes - sent,
            "bytes_per_event": (fake.sync_request_bytes - sent) / max(1, events),
            "answer_items": answered[0], "seconds": took, "cpu_s": cpu}


async def main_async(n_sessions: int, n_events: int, sample: int) -> None:
    fake = FakeUpstream()
    await fake.start()
    try:
        sids = [f"ses_{k:026d}" for k in range(n_sessions)]
        for sid in sids:
            fake.add_session(sid)
            for i in range(n_events):
                await fake.append_legacy(sid, "message.updated", {"info": {"id": f"msg_{i}"}}, live=False)
        batched = await _run(fake, sids, 0, None)
        before = await _run(fake, sids[:sample], 0, PER_SESSION)
    finally:
        await fake.stop()
    scale = n_sessions / before["sessions"]
    print(f"{n_sessions} sessions x {n_events} events of news (sync-log repair of all at once, fake serve)")
    print(f"  batched:     {batched['calls']} calls, {batched['request_bytes'] / 1e6:.2f} MB request, "
          f"{batched['bytes_per_event']:.0f} B/event, {batched['answer_items']} items answered, "
          f"{batched['seconds']:.2f} s, client+fake CPU {batched['cpu_s']:.2f} s")
    print(f"  per session: {round(before['calls'] * scale)} calls, "
          f"{before['request_bytes'] * scale / 1e6:.1f} MB request, "
          f"{before['bytes_per_event']:.0f} B/event, {round(before['answer_items'] * scale)} items answered, "
          f"{before['seconds'] * scale:.1f} s, "
          f"CPU {before['cpu_s'] * scale:.1f} s (measured on {before['sessions']} sessions, scaled)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=2)
    ap.add_argument("--sample", type=int, default=300)
    a = ap.parse_args()
    asyncio.run(main_async(a.sessions, a.events, min(a.sample, a.sessions)))


if __name__ == "__main__":
    main()
