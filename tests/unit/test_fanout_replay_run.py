"""A replay page queued in runs (ClientQueue.offer_durable_run, bridge.fanout.replay_pages): the queue ends in
the state the frame-by-frame path left it in (wait for room, then `offer_durable` each frame), a slow client
still stops the replay at the soft limits and never overflows, a frame too large goes out as a reference."""

from __future__ import annotations

import asyncio
import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bridge.fanout.hub import Client, Hub
from bridge.fanout.queue import ClientQueue, QueueLimits
from bridge.fanout.replay_pages import _queue_page, _read_ahead
from bridge.fanout.shared_reads import Page
from tests.support.waiting import wait_until

SID = "ses_run"


def state(q: ClientQueue) -> tuple[list[object], int, bool, bool]:
    return list(q._items), q.bytes, q.has_room, q.closed


def one_by_one(q: ClientQueue, frames: list[tuple[int, str]], start: int, max_frame: int) -> int:
    """What the replay did before: per frame, stop once closed or without room, else offer it alone."""
    i = start
    while i < len(frames) and not q.closed and q.has_room and len(frames[i][1]) <= max_frame:
        assert q.offer_durable(frames[i][1], (SID, frames[i][0]))
        i += 1
    return i


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 60), max_size=40), queued=st.lists(st.integers(0, 60), max_size=12),
       ephemeral=st.lists(st.integers(0, 30), max_size=4), max_messages=st.integers(2, 30),
       max_bytes=st.integers(2, 600), start=st.integers(0, 5), closed=st.booleans())
@example(sizes=[5, 5, 1, 1], queued=[], ephemeral=[], max_messages=30, max_bytes=20, start=0, closed=False)  # at
@example(sizes=[10, 11, 1], queued=[], ephemeral=[], max_messages=30, max_bytes=20, start=0, closed=False)  # the
@example(sizes=[1] * 9, queued=[1], ephemeral=[1], max_messages=20, max_bytes=100, start=1, closed=False)  # limits
def test_a_run_leaves_the_queue_as_frame_by_frame_offers_did(
    sizes: list[int], queued: list[int], ephemeral: list[int], max_messages: int, max_bytes: int, start: int,
    closed: bool,
) -> None:
    limits = QueueLimits(max_messages=max_messages, max_bytes=max_bytes)
    queues = ClientQueue(limits), ClientQueue(limits)
    frames = [(seq, "é" * (n // 3) + "x" * (n - n // 3)) for seq, n in enumerate(sizes, start=100)]
    for q in queues:  # the same earlier traffic in both
        for seq, n in enumerate(queued, start=1):
            q.offer_durable("d" * n, (SID, seq))
        for n in ephemeral:
            q.offer_ephemeral("e" * n, 1.0)
        if closed:
            q.close()
    start = min(start, len(frames))
    max_frame = max_bytes // 2
    overflowed = queues[0].overflowed  # by the earlier traffic, if at all: a run never overflows
    ran = queues[0].offer_durable_run(SID, frames, start, max_frame)
    assert ran == one_by_one(queues[1], frames, start, max_frame)
    assert state(queues[0]) == state(queues[1])
    assert queues[0].overflowed == queues[1].overflowed == overflowed


async def _drain(q: ClientQueue, got: list[str]) -> None:
    while (batch := await q.get_batch(100)) is not None:
        got.extend(frame for frame, _, _ in batch)
        await asyncio.sleep(0)  # a slow reader: one small batch per turn of the loop


async def test_a_page_reaches_a_slow_client_whole_in_order_without_overflow() -> None:
    client = Client(QueueLimits(max_messages=6, max_bytes=10_000))
    sub = Hub().register(client, SID, 3)
    frames = [(seq, json.dumps({"seq": seq})) for seq in range(1, 41)]
    got: list[str] = []
    reader = asyncio.create_task(_drain(client.queue, got))
    assert await _queue_page(client, sub, Page(frames, full=False)) is True
    assert sub.sent_seq == 40 and not client.queue.overflowed
    await wait_until(lambda: len(client.queue) == 0, 5, 0.001)  # the reader takes what is left
    client.queue.close()
    await reader
    assert [json.loads(f)["seq"] for f in got] == list(range(4, 41))  # seqs at or below `after` skipped
    assert len(client.queue) == 0


async def test_a_frame_too_large_for_the_queue_goes_out_as_a_reference_between_the_others() -> None:
    client = Client(QueueLimits(max_messages=100, max_bytes=2_000))
    sub = Hub().register(client, SID, -1)
    big = json.dumps({"type": "event", "session": SID, "seq": 2, "fields": {"text": "x" * 1_500}, "data": {"a": 1}})
    frames = [(1, json.dumps({"seq": 1})), (2, big), (3, json.dumps({"seq": 3}))]
    assert await _queue_page(client, sub, Page(frames, full=False)) is True
    items = [json.loads(frame) for frame, _, _, _ in client.queue._items]
    assert [m["seq"] for m in items] == [1, 2, 3]
    assert items[1]["truncated"] == {"bytes": len(big)} and items[1]["data"] == {}
    assert [key for _, _, _, key in client.queue._items] == [(SID, 1), (SID, 2), (SID, 3)]


async def test_a_page_with_nothing_new_queues_nothing_and_an_ended_subscription_stops_it() -> None:
    client = Client(QueueLimits())
    hub = Hub()
    sub = hub.register(client, SID, 5)
    frames = [(seq, json.dumps({"seq": seq})) for seq in range(1, 6)]
    assert await _queue_page(client, sub, Page(frames, full=True)) is False
    assert len(client.queue) == 0 and sub.sent_seq == 5
    hub.unregister(client, SID)
    assert await _queue_page(client, sub, Page([(6, "{}")], full=False)) is None
    assert len(client.queue) == 0


class _Reads:
    """The page reads a replay asks for (SharedReads' `page` and `page_size`), never answered."""

    page_size = 4

    def __init__(self) -> None:
        self.asked: list[int] = []

    async def page(self, _owner: str, _session_id: str, after: int) -> Page:
        self.asked.append(after)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def _page(*seqs: int, full: bool = True) -> Page:
    return Page([(s, "{}") for s in seqs], full)


async def test_pages_are_read_ahead_two_when_dense_one_when_not_and_a_wrong_guess_is_cancelled() -> None:
    reads, ahead = _Reads(), dict[int, asyncio.Task[Page]]()
    _read_ahead(reads, "o", SID, _page(1, 2, 3, 4), ahead)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert sorted(ahead) == [4, 8] and reads.asked == [4, 8]  # the next page, and the one after if dense
    stale = ahead[8]
    _read_ahead(reads, "o", SID, _page(5, 6, 9, 10), ahead)  # type: ignore[arg-type]  # holes: no guess
    await asyncio.sleep(0)
    assert sorted(ahead) == [10] and reads.asked == [4, 8, 10] and stale.cancelling()
    _read_ahead(reads, "o", SID, _page(11, 12, full=False), ahead)  # type: ignore[arg-type]  # the end
    assert ahead == {}
