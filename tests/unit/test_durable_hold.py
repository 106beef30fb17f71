"""A follower that /global/event covers reads no sync log (docs/mirror.md "A repair only for a real hole"):
it starts from the twins it was shown while claimed (bridge.upstream.early_twins), and a durable batch that
comes before the twins of the legacy seqs below it waits for them instead of asking the log; a hole
/global/event has shown past is a real one, read at once. Against the in-memory serve (no socket)."""

from __future__ import annotations

from typing import Any

from bridge.events import Envelope
from bridge.events.syncframes import parse_sync_item
from bridge.upstream.durable import DurableFollower
from bridge.upstream.early_twins import EarlyTwins
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from tests.support.memory_upstream import MemorySink, MemoryUpstream, envelope, sse, sync_item
from tests.support.tasks import in_background
from tests.support.waiting import wait_until

SID = "ses_A"


def legacy(seq: int, type_: str = "session.updated") -> dict[str, Any]:
    return envelope(SID, seq, type_, info={"id": SID, "title": f"t{seq}"})


def twin(e: dict[str, Any]) -> Envelope:
    return parse_sync_item(sync_item(e))


def follower(up: MemoryUpstream, sink: MemorySink, early: EarlyTwins | None, cursor: int = 0) -> DurableFollower:
    return DurableFollower(SID, up.client(), sink, cursor, FollowerSettings(
        reconnect_min_s=0.001, reconnect_max_s=0.01, twin_hold_s=30.0, stall_s=60.0), FollowerHooks(rand=lambda: 1.0),
        early=early)


def syncs(up: MemoryUpstream) -> int:
    return up.paths.count("/sync/history")


def seq_0_stored_from_its_twin() -> tuple[MemoryUpstream, MemorySink, DurableFollower]:
    """A session of seqs 0 (`session.created`), 1 and 2 (legacy) and 3 (v2) upstream, its follower shown only
    seq 0's twin while claimed."""
    created, l1, l2, v3 = legacy(0, "session.created"), legacy(1), legacy(2), envelope(SID, 3)
    up = MemoryUpstream(history={SID: []}, sync={SID: [sync_item(e) for e in (created, l1, l2, v3)]})
    sink = MemorySink()
    early = EarlyTwins()
    early.twin(twin(created))
    return up, sink, follower(up, sink, early)


async def test_covered_by_its_early_twins_a_new_session_reads_no_log_and_stores_everything() -> None:
    created, first = legacy(0, "session.created"), envelope(SID, 1)
    up = MemoryUpstream(history={SID: []}, sync={SID: [sync_item(created), sync_item(first)]})
    sink = MemorySink()
    early = EarlyTwins()
    early.twin(twin(created))
    early.seen(1)
    f = follower(up, sink, early)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.push_durable(SID, sse(first))
        await wait_until(lambda: sorted(sink.events) == [0, 1], 5, 0.001, message="both stored")
    assert syncs(up) == 0 and not any("/history" in p for p in up.paths)


async def test_not_covered_it_reads_the_log_first() -> None:
    created = legacy(0, "session.created")
    up = MemoryUpstream(history={SID: []}, sync={SID: [sync_item(created)]})
    early = EarlyTwins()
    early.seen(5)  # the lowest seq shown is above cursor + 1: 0-4 may hold anything
    sink = MemorySink()
    f = follower(up, sink, early)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
    assert syncs(up) == 1 and 0 in sink.events


async def test_a_durable_batch_before_the_twins_below_it_waits_for_them() -> None:
    up, sink, f = seq_0_stored_from_its_twin()
    l1, l2, v3 = legacy(1), legacy(2), envelope(SID, 3)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        await wait_until(lambda: 0 in sink.events, 5, 0.001, message="seq 0 stored from its twin")
        up.push_durable(SID, sse(v3))  # /global/event has shown nothing above 0 yet: 1 and 2 are on their way
        await wait_until(lambda: f.sync.waiting() == {3}, 5, 0.001, message="seq 3 waits")
        f.offer_twin(twin(l1))
        f.offer_twin(twin(l2))
        await wait_until(lambda: sorted(sink.events) == [0, 1, 2, 3], 5, 0.001, message="all stored in order")
    assert syncs(up) == 0


async def test_a_hole_the_live_stream_has_shown_past_is_read_at_once() -> None:
    up, sink, f = seq_0_stored_from_its_twin()
    l2, v3 = legacy(2), envelope(SID, 3)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        await wait_until(lambda: 0 in sink.events, 5, 0.001, message="seq 0 stored from its twin")
        f.offer_twin(twin(l2))  # 2 shown, 1 never: lost on the live stream
        up.push_durable(SID, sse(v3))
        await wait_until(lambda: sorted(sink.events) == [0, 1, 2, 3], 5, 0.001, message="repaired")
    assert syncs(up) == 1
