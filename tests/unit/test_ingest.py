"""bridge.upstream.ingest: one owner of a session's writes. The cursor moves only through what the sink
returns; a batch above cursor + 1 is repaired from the sync log first; every batch is bounded; what cannot
be stored is kept as a reject."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from bridge.events import ChatEvent, normalize, parse_envelope
from bridge.perf.turnstile import Turnstile
from bridge.upstream.ingest import IngestParts, SessionIngest
from bridge.upstream.twin_shelf import TwinShelf
from tests.support.memory_upstream import MemorySink, MemoryUpstream, envelope, sync_item

SID = "ses_A"
AT = datetime(2026, 1, 1, tzinfo=UTC)


def event(seq: int) -> ChatEvent:
    return normalize(parse_envelope(envelope(SID, seq)))


def ingest(up: MemoryUpstream, sink: MemorySink, cursor: int = 0, **kw: Any) -> SessionIngest:
    return SessionIngest(SID, up.client(), sink, cursor, structlog.get_logger("test"), IngestParts(Turnstile(), **kw))


async def test_a_contiguous_batch_is_committed_without_reading_the_sync_log() -> None:
    up, sink = MemoryUpstream(sync={SID: []}), MemorySink()
    async with up.client():
        i = ingest(up, sink)
        await i.write([event(1), event(2)], AT, "stream")
    assert (i.cursor, sorted(sink.events)) == (2, [1, 2])
    assert "/sync/history" not in up.paths


async def test_a_batch_above_the_cursor_is_repaired_from_the_sync_log_first() -> None:
    log = [sync_item(envelope(SID, s)) for s in (1, 2, 3)]
    up, sink = MemoryUpstream(sync={SID: log}), MemorySink()
    i = ingest(up, sink)
    async with up.client():
        await i.write([event(3), event(4)], AT, "stream")
    assert i.cursor == 4 and sorted(sink.events) == [1, 2, 3, 4]
    assert up.paths.count("/sync/history") == 1


async def test_a_batch_whose_holes_are_waiting_twins_is_written_with_them_without_the_sync_log() -> None:
    # docs/mirror.md rule 3: the legacy twins between a durable batch's events arrived first, on /global/event
    up, sink = MemoryUpstream(sync={SID: []}), MemorySink()
    shelf = TwinShelf()
    i = ingest(up, sink, cursor=2, shelf=shelf)
    for seq in (4, 6, 9):
        shelf.offer(parse_envelope(envelope(SID, seq)), i.cursor)
    async with up.client():
        await i.write([event(3), event(5), event(7)], AT, "stream")
    assert (i.cursor, sorted(sink.events)) == (7, [3, 4, 5, 6, 7])  # 9 waits for 8
    assert "/sync/history" not in up.paths
    shelf.take(None, i.cursor)
    async with up.client():
        await i.write([event(10)], AT, "stream")  # 8 and 9 not waiting: the log is asked
    assert up.paths.count("/sync/history") == 1


async def test_events_at_or_below_the_cursor_are_not_written_again() -> None:
    up, sink = MemoryUpstream(sync={SID: []}), MemorySink()
    i = ingest(up, sink, cursor=2)
    async with up.client():
        await i.write([event(1), event(2)], AT, "stream")
    assert sink.writes == 0 and i.cursor == 2


async def test_a_commit_is_cut_into_batches_and_each_batch_is_reported() -> None:
    up, sink = MemoryUpstream(sync={SID: []}), MemorySink()
    seen: list[Sequence[ChatEvent]] = []
    i = ingest(up, sink, batch_max_events=2, on_batch=seen.append)
    await i.store([event(s) for s in (1, 2, 3, 4, 5)], AT, "history")
    assert [[e.seq for e in b] for b in seen] == [[1, 2], [3, 4], [5]]
    assert sink.writes == 3 and i.cursor == 5


async def test_a_frame_that_is_not_a_durable_event_of_this_session_is_kept_as_a_reject() -> None:
    up, sink = MemoryUpstream(), MemorySink()
    i = ingest(up, sink)
    assert await i.accept_frames(["{not json"], AT) == []
    other = json.dumps(envelope(SID, 7, aggregate="ses_B"))
    assert await i.accept_frames([other], AT) == []
    (ok,) = await i.accept_frames([json.dumps(envelope(SID, 1))], AT)
    assert ok.seq == 1
    assert sink.rejects == [("bad_json", None), ("wrong_session", 7)]


async def test_a_reads_frames_give_what_each_frame_alone_gives_in_order_rejects_included() -> None:
    frames = [json.dumps(envelope(SID, 1)), "{not json", json.dumps(envelope(SID, 2)),
              json.dumps(envelope(SID, 7, aggregate="ses_B")), json.dumps({"id": "e", "type": "x.y"}),
              json.dumps(envelope(SID, 3))]
    one_sink, each_sink = MemorySink(), MemorySink()
    together = await ingest(MemoryUpstream(), one_sink).accept_frames(frames, AT)
    alone = ingest(MemoryUpstream(), each_sink)
    each = [ev for f in frames for ev in await alone.accept_frames([f], AT)]
    assert [e.seq for e in together] == [1, 2, 3] and together == each
    assert one_sink.rejects == each_sink.rejects == [("bad_json", None), ("wrong_session", 7), ("not_durable", None)]
