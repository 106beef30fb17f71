"""One cursor, two sources (docs/mirror.md): the follower's writes against an in-memory upstream whose
sync log holds legacy and v2 events. The cursor only ever moves over a contiguous run; the sync log fills
what the durable stream skips; exact twins are stored directly; only a hole of the log itself remains."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge import metrics
from bridge.errors import BodyTooLarge, InvalidSessionId
from bridge.events.syncframes import parse_sync_item
from bridge.upstream.client import FROM_START
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from tests.support.memory_upstream import MemorySink, MemoryUpstream, envelope, sse, sync_item
from tests.support.tasks import in_background
from tests.support.waiting import wait_until

SID = "ses_A"


def legacy(seq: int, type_: str = "message.updated", **data: Any) -> dict[str, Any]:
    return {"id": f"evt_L{seq:04d}", "aggregate_id": SID, "seq": seq, "type": f"{type_}.1",
            "data": {"sessionID": SID, **data}}


def v2(seq: int, type_: str = "session.next.text.started") -> dict[str, Any]:
    return envelope(SID, seq, type_)


def follower(up: MemoryUpstream, sink: MemorySink, cursor: int = 0, **kw: Any) -> DurableFollower:
    kw.setdefault("reconnect_min_s", 0.001)
    kw.setdefault("reconnect_max_s", 0.01)
    return DurableFollower(SID, up.client(), sink, cursor, FollowerSettings(**kw), FollowerHooks(rand=lambda: 1.0))


def sync_reads(up: MemoryUpstream) -> int:
    return sum(1 for p in up.paths if p == "/sync/history")


async def test_catch_up_reads_the_sync_log_and_stores_legacy_and_v2_events_in_one_order() -> None:
    log = [legacy(1, "session.updated"), legacy(2), legacy(3), sync_item(v2(4)), sync_item(v2(5))]
    up = MemoryUpstream(history={SID: [v2(4), v2(5)]}, sync={SID: log})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: sink.cursor == 5, 5, 0.001, message="log stored")
    assert sorted(sink.events) == [1, 2, 3, 4, 5]
    assert [sink.events[s].envelope.id for s in (1, 4)] == ["evt_L0001", v2(4)["id"]]
    # the v2 rows carry the durable stream's envelope whichever source gave them (docs/legacy.md)
    assert sink.events[4].envelope.raw == v2(4)
    assert sink.events[1].envelope.raw == log[0]


async def test_a_durable_batch_above_cursor_plus_one_is_repaired_first_then_is_a_no_op() -> None:
    up = MemoryUpstream(history={SID: []}, sync={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        reads = sync_reads(up)
        # A legacy turn took seqs 1-3 (never on the durable stream), then a v2 turn: 4 and 5.
        up.sync[SID] = [legacy(1), legacy(2), legacy(3), sync_item(v2(4)), sync_item(v2(5))]
        up.push_durable(SID, sse(v2(4), v2(5)))
        await wait_until(lambda: sink.cursor == 5, 5, 0.001, message="repaired and stored")
        assert sync_reads(up) == reads + 1
        up.push_durable(SID, sse(v2(6)))
        up.sync[SID].append(sync_item(v2(6)))
        await wait_until(lambda: sink.cursor == 6, 5, 0.001, message="next event stored")
        assert sync_reads(up) == reads + 1  # contiguous again: no repair
    assert sorted(sink.events) == [1, 2, 3, 4, 5, 6]


async def test_exact_twins_next_in_line_are_stored_without_a_request() -> None:
    up = MemoryUpstream(history={SID: []}, sync={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        before = len(up.paths)
        for seq in (0, 1, 2, 3):  # a new session: its `session.created` is seq 0 (docs/upstream.md §14)
            f.offer_twin(parse_sync_item(legacy(seq)))
        await wait_until(lambda: sink.cursor == 3, 5, 0.001, message="twins stored")
        assert len(up.paths) == before
        assert f.sync.twins_written == 4
        f.offer_twin(parse_sync_item(legacy(2)))  # a repeat: at or below the cursor, ignored
    assert sorted(sink.events) == [0, 1, 2, 3]


async def test_twins_above_a_hole_poke_one_coalesced_repair() -> None:
    up = MemoryUpstream(history={SID: []}, sync={SID: []})
    sink = MemorySink()
    f = follower(up, sink, repair_debounce_s=0.05)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        reads = sync_reads(up)
        up.sync[SID] = [legacy(s) for s in range(1, 21)]
        for seq in range(3, 21):  # 1 and 2 were lost (a live reconnect)
            f.offer_twin(parse_sync_item(legacy(seq)))
        await wait_until(lambda: sink.cursor == 20, 5, 0.001, message="repaired")
        assert sync_reads(up) == reads + 1
    assert sorted(sink.events) == list(range(1, 21))


async def test_request_repair_after_a_live_reconnect_reads_what_was_missed() -> None:
    up = MemoryUpstream(history={SID: []}, sync={SID: []})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.sync[SID] = [legacy(1), legacy(2)]
        f.request_repair("live_reconnect")
        f.request_repair("live_reconnect")
        await wait_until(lambda: sink.cursor == 2, 5, 0.001, message="repaired")
    assert sorted(sink.events) == [1, 2]


async def test_a_hole_the_sync_log_lacks_is_stored_around_and_counted() -> None:
    holes = metrics.SYNC_LOG_HOLES._value.get()
    up = MemoryUpstream(history={SID: [v2(4)]}, sync={SID: [legacy(1), sync_item(v2(4))]})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: sink.cursor == 4, 5, 0.001, message="stored")
    assert sorted(sink.events) == [1, 4]  # 2 and 3 exist nowhere: the activity tracker records the gap
    assert metrics.SYNC_LOG_HOLES._value.get() > holes


async def test_a_broken_log_item_is_rejected_and_other_sessions_are_left_out() -> None:
    bad = [legacy(1), {"seq": 3}, legacy(3)]
    other = [{**legacy(s), "aggregate_id": "ses_B", "id": f"evt_B{s}"} for s in (0, 1, 2)]
    up = MemoryUpstream(history={SID: []}, sync={SID: bad, "ses_B": other})
    sink = MemorySink()
    f = follower(up, sink)
    async with in_background(f.run()):
        await wait_until(lambda: sink.cursor == 3, 5, 0.001, message="stored")
        assert sorted(sink.events) == [1, 3]
        assert [r for r, _ in sink.rejects] == ["bad_shape"]  # ses_B's log is not ours, not a reject
        # the client learnt ses_B from the answer: the next read names it with the largest cutoff
        f.request_repair("test")
        await wait_until(lambda: sum(p == "/sync/history" for p in up.paths) == 2, 5, 0.001)
    asked = json.loads([r for r in up.transport.requests if r.path == "/sync/history"][-1].body or b"")
    assert asked == {SID: 3, "ses_B": 2**53 - 1}


async def test_a_sync_log_over_the_body_bound_falls_back_to_history_and_leaves_a_gap() -> None:
    log = [legacy(1, text="x" * 5000), legacy(2, text="y" * 5000), sync_item(v2(3))]
    up = MemoryUpstream(history={SID: [v2(3)]}, sync={SID: log})
    sink = MemorySink()
    f = DurableFollower(SID, up.client(max_body_bytes=4000), sink, 0,
                        FollowerSettings(reconnect_min_s=0.001, reconnect_max_s=0.01))
    async with in_background(f.run()):
        await wait_until(lambda: sink.cursor == 3, 5, 0.001, message="v2 event from /history")
    assert sorted(sink.events) == [3]


async def test_client_sync_history_posts_the_cursor_and_checks_the_id() -> None:
    up = MemoryUpstream(sync={SID: [legacy(1), legacy(2)]})
    async with up.client() as client:
        assert [i["seq"] for i in await client.sync_history(SID, 1)] == [2]
        with pytest.raises(InvalidSessionId):
            await client.sync_history("x/../ses_B", 0)
    req = up.transport.requests[0]
    assert (req.method, req.path, json.loads(req.body or b"")) == ("POST", "/sync/history", {SID: 1})
    assert req.headers["Content-Type"] == "application/json"
    async with up.client(max_body_bytes=10) as client:
        with pytest.raises(BodyTooLarge):
            await client.sync_history(SID, 0)


async def test_twins_above_a_log_over_the_body_bound_are_stored_over_the_hole_once() -> None:
    log = [legacy(1, text="x" * 5000), legacy(2), legacy(3)]
    up = MemoryUpstream(history={SID: []}, sync={SID: []})
    sink = MemorySink()
    f = DurableFollower(SID, up.client(max_body_bytes=4000), sink, 0,
                        FollowerSettings(reconnect_min_s=0.001, reconnect_max_s=0.01))
    async with in_background(f.run()):
        await wait_until(lambda: f.connected.is_set(), 5, 0.001, message="durable stream open")
        up.sync[SID] = log
        f.offer_twin(parse_sync_item(legacy(2)))  # 1 was lost and the log is too large to read
        f.offer_twin(parse_sync_item(legacy(3)))
        await wait_until(lambda: sink.cursor == 3, 5, 0.001, message="twins stored over the hole")
        reads = sync_reads(up)
        f.offer_twin(parse_sync_item(legacy(3)))
    assert sorted(sink.events) == [2, 3] and sync_reads(up) == reads


async def test_a_new_session_stores_its_seq_0_from_the_sync_log() -> None:
    """A stored cursor of 0 reads from before seq 0: `session.created` (seq 0) is stored, once (§14)."""
    log = [legacy(0, "session.created"), legacy(1), legacy(2)]
    up = MemoryUpstream(history={SID: []}, sync={SID: log})
    sink = MemorySink()
    f = follower(up, sink, 0)
    async with in_background(f.run()):
        await wait_until(lambda: sorted(sink.events) == [0, 1, 2], 5, 0.001, message="seq 0 stored")
    sync = [json.loads(r.body or b"") for r in up.transport.requests if r.path == "/sync/history"]
    assert sync and SID not in sync[0]  # a cutoff below 0 is refused upstream: the session is not named
    assert not [p for p in up.paths if "after=-" in p]  # durable reads and /history start at after=0


async def test_client_sync_history_from_start_names_every_other_session_only() -> None:
    up = MemoryUpstream(sync={SID: [legacy(0), legacy(1)], "ses_B": [{**legacy(0), "aggregate_id": "ses_B"}]})
    async with up.client() as client:
        await client.sync_history("ses_B", 0)  # now known
        items = await client.sync_history(SID, FROM_START)
    assert [i["seq"] for i in items if i["aggregate_id"] == SID] == [0, 1]
    assert SID not in json.loads(up.transport.requests[-1].body or b"")
