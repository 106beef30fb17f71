"""The pipelined `/history` catch-up (bridge.upstream.catchup) through an in-memory transport and sink."""

from __future__ import annotations

import asyncio

from bridge import metrics
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerSettings
from tests.support.memory_upstream import MemorySink, MemoryUpstream, envelope

SID = "ses_A"


async def test_a_page_ahead_over_the_body_bound_is_asked_again_one_event_at_a_time_after_the_write() -> None:
    small = [envelope(SID, s) for s in (1, 2, 3)]
    huge = envelope(SID, 4, "session.next.text.ended", textID="t", text="x" * 50_000)
    up = MemoryUpstream(history={SID: [*small, huge]})
    sink = MemorySink()
    before = metrics.REJECTS.labels(reason="history_too_large")._value.get()
    f = DurableFollower(SID, up.client(max_body_bytes=10_000), sink, 0, FollowerSettings(
        reconnect_min_s=0.001, reconnect_max_s=0.01, max_stuck_passes=1, history_page=2))
    async with asyncio.timeout(10):
        exit_ = await f.run()

    assert exit_ is FollowerExit.STUCK
    assert [p for p in up.paths if p != "/sync/history"] == [
        "/api/session/ses_A/history?after=0&limit=2",
        "/api/session/ses_A/history?after=2&limit=2",  # ahead, while 1 and 2 were written: over the bound
        "/api/session/ses_A/history?after=2&limit=1",
        "/api/session/ses_A/history?after=3&limit=1",  # ahead, while 3 was written: 4 alone is over it
    ]
    assert sorted(sink.events) == [1, 2, 3]
    assert metrics.REJECTS.labels(reason="history_too_large")._value.get() == before + 2
