"""The hub and the per-client queue, without sockets or a database."""

from __future__ import annotations

import json

import pytest

from bridge.events import normalize, parse_envelope
from bridge.fanout.hub import PENDING_MAX, Client, Hub
from bridge.fanout.queue import ClientQueue, QueueLimits

SID = "ses_a"


def frame(seq: int) -> str:
    return json.dumps({"type": "event", "session": SID, "seq": seq})


def delta(text: str = "x"):  # type: ignore[no-untyped-def]
    return normalize(parse_envelope({"id": "evt_d", "type": "session.next.text.delta", "data": {
        "sessionID": SID, "assistantMessageID": "msg", "textID": "t0", "delta": text}}))


def drain(c: Client) -> list[dict[str, object]]:
    out = []
    while len(c.queue):
        item = c.queue._items.popleft()
        out.append(json.loads(item[0]))
    c.queue._bytes = 0
    return out


def live_client(hub: Hub, after: int = -1, limits: QueueLimits | None = None) -> Client:
    c = Client(limits or QueueLimits())
    sub = hub.register(c, SID, after)
    assert hub.go_live(sub, after)
    return c


def test_live_durable_events_are_sent_once_in_seq_order() -> None:
    hub = Hub()
    c = live_client(hub, after=2)
    hub.publish_durable(SID, [(1, frame(1)), (2, frame(2)), (3, frame(3))])
    hub.publish_durable(SID, [(3, frame(3)), (5, frame(5))])
    assert [m["seq"] for m in drain(c)] == [3, 5]
    assert hub.published_seq(SID) == 5


def test_traffic_during_replay_is_held_and_only_new_seqs_are_released() -> None:
    hub = Hub()
    other = live_client(hub, after=0)
    c = Client(QueueLimits())
    sub = hub.register(c, SID, 0)
    hub.publish_durable(SID, [(1, frame(1)), (2, frame(2))])  # also read by the replay below
    hub.publish_delta(SID, delta("d"))
    assert len(c.queue) == 0
    sub.sent_seq = 2  # the replay read 1..2 from the database
    c._durable(frame(1))
    c._durable(frame(2))
    assert hub.go_live(sub, 2)
    hub.publish_durable(SID, [(3, frame(3))])
    msgs = drain(c)
    assert [(m["type"], m.get("seq"), m.get("after_seq")) for m in msgs] == [
        ("event", 1, None), ("event", 2, None), ("delta", None, 2), ("event", 3, None)]
    assert [m["seq"] for m in drain(other) if m["type"] == "event"] == [1, 2, 3]


def test_held_traffic_overflow_makes_the_replay_read_again() -> None:
    hub = Hub()
    live_client(hub)
    c = Client(QueueLimits(max_messages=10 * PENDING_MAX))
    sub = hub.register(c, SID, -1)
    hub.publish_durable(SID, [(s, frame(s)) for s in range(1, PENDING_MAX + 2)])
    assert not hub.go_live(sub, 0)
    assert sub.replaying and sub.pending == []
    assert hub.go_live(sub, PENDING_MAX + 1)


def test_first_subscriber_sets_the_published_seq_and_wakes_the_feed() -> None:
    woken: list[str] = []
    hub = Hub(wake=woken.append)
    c = Client(QueueLimits())
    sub = hub.register(c, SID, 4)
    assert hub.published_seq(SID) is None
    hub.go_live(sub, 7)
    assert hub.published_seq(SID) == 7 and woken == [SID]
    hub.unregister(c, SID)
    assert hub.published_seq(SID) is None and not hub.has_subscribers(SID)


def test_a_slow_client_loses_deltas_first_then_is_ended_without_touching_others() -> None:
    hub = Hub()
    limits = QueueLimits(max_messages=10, max_bytes=10_000)
    slow = live_client(hub, limits=limits)
    fast = live_client(hub, limits=limits)
    ended: list[int] = []
    slow._on_overflow = lambda c: ended.append(c.id)
    for s in range(1, 5):
        hub.publish_durable(SID, [(s, frame(s))])
        drain(fast)
    for _ in range(3):
        hub.publish_delta(SID, delta())
    assert len(drain(fast)) == 3  # a client that keeps up gets every delta
    assert len(slow.queue) == 5 and slow.queue.dropped_ephemeral == 2  # half of 10 messages: deltas stop
    for s in range(5, 11):
        hub.publish_durable(SID, [(s, frame(s))])
        assert len(drain(fast)) == 1
    # 4 + 1 delta + 6 durable > 10: the delta is evicted first, so durable 5..10 still fit.
    assert not slow.queue.closed and len(slow.queue) == 10
    hub.publish_durable(SID, [(11, frame(11))])
    assert slow.queue.closed and slow.queue.overflowed and slow.close_reason == "slow_consumer"
    assert ended == [slow.id]
    assert [m["seq"] for m in drain(fast)] == [11]
    slow.written[SID] = 3
    assert slow.resume_points() == {SID: 3}


async def test_queue_get_returns_frames_in_order_then_none_when_closed() -> None:
    q = ClientQueue(QueueLimits(max_messages=4, max_bytes=100))
    assert q.offer_durable("a", (SID, 1))
    assert q.offer_ephemeral("b", 1.0)
    assert await q.get() == ("a", 0.0, (SID, 1))
    assert await q.get() == ("b", 1.0, None)
    q.close()
    assert await q.get() is None
    assert not q.offer_durable("c")


def test_queue_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        QueueLimits(max_messages=1)


def test_a_status_is_sent_only_when_newer_than_what_the_subscriber_has() -> None:
    hub = Hub()
    c = live_client(hub)
    hub.publish_status(SID, "running", None, 2)
    hub.publish_status(SID, "idle", "late", 1)  # an older write whose notification came late
    hub.publish_status(SID, "running", None, 2)  # the same write twice (notify, then a re-read)
    hub.publish_status(SID, "idle", "turn ended", 3)
    assert [(m["status"], m["reason"]) for m in drain(c)] == [("running", None), ("idle", "turn ended")]


def test_a_status_held_during_replay_is_dropped_if_subscribed_already_showed_a_newer_one() -> None:
    hub = Hub()
    c = Client(QueueLimits())
    sub = hub.register(c, SID, -1)
    hub.publish_status(SID, "running", None, 4)  # committed while the subscription was being set up
    hub.publish_status(SID, "idle", None, 6)
    sub.status_version = 5  # the head read for `subscribed` saw version 5
    assert hub.go_live(sub, -1)
    assert [m["status"] for m in drain(c)] == ["idle"]
