"""bridge.upstream.stall: the durable stream is ended when /global/event announced a seq it has not
delivered within `stall_s`, and only then."""

from __future__ import annotations

import asyncio

import structlog

from bridge.perf.turnstile import Turnstile
from bridge.upstream.ingest import SessionIngest
from bridge.upstream.stall import StallWatch
from tests.support.memory_upstream import MemorySink, MemoryUpstream


def watch(cursor: int, stall_s: float) -> StallWatch:
    ingest = SessionIngest("ses_A", MemoryUpstream().client(), MemorySink(), cursor, structlog.get_logger("test"),
                           turnstile=Turnstile())
    return StallWatch(ingest, stall_s)


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
