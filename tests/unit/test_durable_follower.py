"""The durable follower driven through an in-memory transport and sink (no sockets, no database)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bridge import metrics
from bridge.events import SEQ_MAX
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from tests.support.memory_upstream import MemorySink, MemoryUpstream, envelope, sse, sync_item
from tests.support.tasks import in_background
from tests.support.waiting import wait_until

SID = "ses_A"



def rest_paths(up: MemoryUpstream) -> list[str]:
    """The requests other than the sync-log reads every catch-up starts with (docs/mirror.md)."""
    return [p for p in up.paths if p != "/sync/history"]


def follower(up: MemoryUpstream, sink: MemorySink, cursor: int = 0, **kw: Any) -> DurableFollower:
    kw.setdefault("reconnect_min_s", 0.001)
    kw.setdefault("reconnect_max_s", 0.01)
    return DurableFollower(SID, up.client(), sink, cursor, FollowerSettings(**kw), FollowerHooks(rand=lambda: 1.0))


async def run_until_exit(f: DurableFollower, timeout: float = 10) -> FollowerExit:
    async with asyncio.timeout(timeout):  # a follower that spins never gets here
        return await f.run()


def counter(metric: Any, **labels: str) -> float:
    return float(metric.labels(**labels)._value.get())


async def test_catch_up_then_stream_stores_every_event_once_in_order() -> None:
    up = MemoryUpstream(history={SID: [envelope(SID, 1), envelope(SID, 3)]})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.push_durable(SID, sse(envelope(SID, 4), envelope(SID, 5)))
        await wait_until(lambda: sink.cursor == 5, 5, 0.001, message="streamed events stored")
    assert sorted(sink.events) == [1, 3, 4, 5]
    assert "/api/session/ses_A/event?after=3" in up.paths  # resumed after the catch-up's cursor
    assert sink.writes == 2  # one write per history page, one per stream read


async def test_a_whole_sync_log_read_with_news_asks_no_history_page() -> None:
    log = [envelope(SID, 0, "session.created"), envelope(SID, 1), envelope(SID, 2)]  # seq 0: the log's first
    up = MemoryUpstream(history={SID: log[1:]}, sync={SID: [sync_item(e) for e in log]})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
    assert sorted(sink.events) == [0, 1, 2]
    assert rest_paths(up) == ["/api/session/ses_A/event?after=2"]  # the log's end: streamed from it


async def test_a_sync_log_read_with_a_hole_still_pages_history() -> None:
    log = [envelope(SID, 0, "session.created"), envelope(SID, 1), envelope(SID, 2), envelope(SID, 3)]
    up = MemoryUpstream(history={SID: log[1:]}, sync={SID: [sync_item(e) for e in (log[0], log[1], log[3])]})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")  # seq 2 lost
    assert 3 in sink.events
    assert any("/history" in p for p in rest_paths(up))


async def test_a_frame_split_across_reads_is_stored_once_complete() -> None:
    up = MemoryUpstream(history={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    frame = sse(envelope(SID, 1))
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.push_durable(SID, frame[:10])
        up.push_durable(SID, frame[10:])
        await wait_until(lambda: sink.cursor == 1, 5, 0.001, message="event stored")


async def test_an_upstream_404_ends_the_follower_as_gone() -> None:
    assert await run_until_exit(follower(MemoryUpstream(), MemorySink())) is FollowerExit.GONE


async def test_an_id_of_the_wrong_shape_is_gone_without_any_request() -> None:
    up = MemoryUpstream()
    f = DurableFollower("x/../ses_REAL", up.client(), MemorySink(), 0)
    before = counter(metrics.REJECTS, reason="bad_session_id")
    assert await run_until_exit(f) is FollowerExit.GONE
    assert up.transport.requests == []
    assert counter(metrics.REJECTS, reason="bad_session_id") == before + 1


async def test_the_stores_lease_lost_ends_the_follower_untranslated() -> None:
    up = MemoryUpstream(history={SID: [envelope(SID, 1)]})
    assert await run_until_exit(follower(up, MemorySink(lease_lost=True))) is FollowerExit.LEASE_LOST


async def test_pages_whose_every_event_is_rejected_stop_the_follower_after_a_few_passes_with_backoff() -> None:
    # hasMore set and every event another session's: asking again returns the same page, forever.
    foreign = [envelope(SID, s, aggregate="ses_OTHER") for s in range(1, 4)]
    up = MemoryUpstream(history={SID: foreign}, has_more=lambda _sid, _after: True)
    sink = MemorySink()
    before = counter(metrics.FOLLOWERS_STUCK, reason="history_all_rejected")
    retries = counter(metrics.UPSTREAM_RECONNECTS, stream="durable", cause="history_all_rejected")

    exit_ = await run_until_exit(follower(up, sink, max_stuck_passes=3))

    assert exit_ is FollowerExit.STUCK
    assert len(rest_paths(up)) == 3  # one page per pass, no tight loop in between
    assert counter(metrics.FOLLOWERS_STUCK, reason="history_all_rejected") == before + 3
    assert counter(metrics.UPSTREAM_RECONNECTS, stream="durable", cause="history_all_rejected") == retries + 2
    assert sink.events == {} and {r for r, _ in sink.rejects} == {"wrong_session"}


async def test_a_history_page_over_the_body_bound_is_retried_one_event_at_a_time_then_stops() -> None:
    huge = envelope(SID, 1, "session.next.text.ended", textID="t", text="x" * 50_000)
    up = MemoryUpstream(history={SID: [huge, envelope(SID, 2)]})
    sink = MemorySink()
    before = counter(metrics.REJECTS, reason="history_too_large")

    f = DurableFollower(SID, up.client(max_body_bytes=10_000), sink, 0, FollowerSettings(
        reconnect_min_s=0.001, reconnect_max_s=0.01, max_stuck_passes=2))
    exit_ = await run_until_exit(f)

    assert exit_ is FollowerExit.STUCK
    pages = ["/api/session/ses_A/history?after=0&limit=100", "/api/session/ses_A/history?after=0&limit=1"]
    assert rest_paths(up) == pages * 2
    assert counter(metrics.REJECTS, reason="history_too_large") == before + 4
    assert sink.events == {}


async def test_a_large_page_of_small_events_is_read_one_event_at_a_time() -> None:
    events = [envelope(SID, s, "session.next.text.ended", textID="t", text="y" * 3000) for s in range(1, 6)]
    up = MemoryUpstream(history={SID: events})
    sink = MemorySink()
    f = DurableFollower(SID, up.client(max_body_bytes=5000), sink, 0)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="caught up, streaming")
    assert sorted(sink.events) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("seq", [SEQ_MAX + 1, 10**30])
async def test_a_seq_beyond_bigint_is_rejected_and_the_follower_goes_on(seq: int) -> None:
    up = MemoryUpstream(history={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()) as task:
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.push_durable(SID, sse(envelope(SID, seq)) + sse(envelope(SID, 2)))
        await wait_until(lambda: sink.cursor == 2, 5, 0.001, message="the next event stored")
        assert not task.done()
    assert sink.rejects == [("bad_durable", None)]


async def test_a_nul_in_an_aggregate_id_is_rejected_not_raised() -> None:
    up = MemoryUpstream(history={SID: [envelope(SID, 1, aggregate="ses_A\x00"), envelope(SID, 2)]})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="caught up")
    assert sorted(sink.events) == [2] and sink.rejects == [("wrong_session", 1)]


async def test_a_cut_stream_reconnects_after_the_stored_cursor() -> None:
    up = MemoryUpstream(history={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.push_durable(SID, sse(envelope(SID, 1)) + b'data: {"id":"evt_cut"')  # cut mid-frame
        up.end_durable(SID)
        await wait_until(lambda: "/api/session/ses_A/event?after=1" in up.paths, 5, 0.001,
                         message="reconnected after seq 1")
    assert sorted(sink.events) == [1] and sink.rejects == []


async def test_a_bad_frame_on_the_stream_is_kept_as_a_reject() -> None:
    up = MemoryUpstream(history={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.push_durable(SID, b"data: {not json\n\n" + sse(envelope(SID, 1)))
        await wait_until(lambda: sink.cursor == 1, 5, 0.001, message="good event stored")
    assert sink.rejects == [("bad_json", None)]
    assert json.loads(json.dumps(sink.events[1].envelope.raw))["id"] == "evt_ses_A_1"
