"""bridge.upstream.stall: the durable stream is ended when /global/event announced a seq it has not
delivered within `stall_s`, and only then; with a process-wide governor, not while the process serves
every stream that late (bridge.upstream.stall_policy)."""

from __future__ import annotations

import asyncio

import structlog

from bridge import metrics
from bridge.perf.turnstile import Turnstile
from bridge.upstream.ingest import IngestParts, SessionIngest
from bridge.upstream.stall import StallWatch
from bridge.upstream.stall_policy import StallGovernor
from tests.support.memory_upstream import MemorySink, MemoryUpstream


def watch(cursor: int, stall_s: float, governor: StallGovernor | None = None) -> StallWatch:
    ingest = SessionIngest("ses_A", MemoryUpstream().client(), MemorySink(), cursor, structlog.get_logger("test"),
                           IngestParts(Turnstile()))
    return StallWatch(ingest, stall_s, governor)


def holds(why: str) -> float:
    return metrics.DURABLE_STALL_HOLDS.labels(why=why)._value.get()


async def test_an_announced_seq_that_does_not_arrive_ends_the_stream() -> None:
    w = watch(cursor=3, stall_s=0.05)
    w.seen(4)
    assert await asyncio.wait_for(w.run(asyncio.Event().wait), 5) is True


async def test_without_an_announcement_beyond_the_cursor_there_is_no_timer() -> None:
    w = watch(cursor=3, stall_s=0.01)
    w.seen(2)
    ended = asyncio.Event()

    async def stream() -> None:
        w.seen(3)  # at the cursor: nothing missing
        await asyncio.sleep(0.05)  # five stall periods: an armed timer would have ended the stream
        ended.set()

    assert await w.run(stream) is False and ended.is_set()


async def test_end_now_ends_the_watched_stream_at_once() -> None:
    w = watch(cursor=0, stall_s=60)

    async def stream() -> None:
        w.end_now()
        await asyncio.Event().wait()

    assert await asyncio.wait_for(w.run(stream), 5) is True


async def others_delivering(g: StallGovernor, late_s: float) -> None:
    """The process's other streams: each stores a batch `late_s` after its announcement, all the time."""
    loop = asyncio.get_running_loop()
    while True:
        g.delivered(late_s, loop.time())
        await asyncio.sleep(0.005)


async def test_a_stream_as_late_as_the_process_serves_the_others_is_kept_open() -> None:
    g = StallGovernor(0.02)
    others = asyncio.create_task(others_delivering(g, 30.0))  # the process serves streams 30 s late now
    w = watch(cursor=3, stall_s=0.02, governor=g)
    before = holds("backlog")
    read = asyncio.Event()

    async def stream() -> None:
        w.seen(4)
        await asyncio.sleep(0.2)  # ten stall periods: the bound alone would have ended the stream
        read.set()

    try:
        assert await w.run(stream) is False and read.is_set()
    finally:
        others.cancel()
    assert holds("backlog") == before + 1  # counted once, however often it looked


async def test_a_stream_later_than_the_process_serves_the_others_is_ended() -> None:
    g = StallGovernor(0.05)
    others = asyncio.create_task(others_delivering(g, 0.1))  # the others come 100 ms late: bound 0.15 s
    w = watch(cursor=3, stall_s=0.05, governor=g)
    w.seen(4)
    started = asyncio.get_running_loop().time()
    try:
        assert await asyncio.wait_for(w.run(asyncio.Event().wait), 5) is True
    finally:
        others.cancel()
    assert asyncio.get_running_loop().time() - started >= 0.15


async def test_a_stored_batch_tells_the_governor_how_late_it_came() -> None:
    g = StallGovernor(60)
    w = watch(cursor=3, stall_s=60, governor=g)

    async def stream() -> None:
        w.seen(5)
        await asyncio.sleep(0.05)
        w.arm(progress=True)  # a batch stored, seq 5 still missing: a new wait starts
        w.arm(progress=True)

    assert await w.run(stream) is False
    assert 0.05 <= g.backlog(asyncio.get_running_loop().time()) < 1.0
    assert g.open_waits == 0  # every wait it opened is closed when the stream ends


async def test_waits_outside_the_stream_are_not_deliveries() -> None:
    """A catch-up after a reconnect stores batches with no stream open: no lateness is reported."""
    g = StallGovernor(60)
    w = watch(cursor=3, stall_s=60, governor=g)
    w.seen(5)
    w.arm(progress=True)
    assert g.backlog(asyncio.get_running_loop().time()) == 0.0


async def test_the_lateness_lent_to_held_twins_is_capped() -> None:
    g = StallGovernor(1.0, max_wait_s=5.0, crowd=1)
    w = watch(cursor=3, stall_s=1.0, governor=g)
    g.delivered(500.0, asyncio.get_running_loop().time())
    assert w.backlog() == 5.0
