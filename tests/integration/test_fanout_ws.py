"""`/v1/ws` against a real PostgreSQL, in-process: replay then live without gap or duplicate, commit
notifications across processes, permissions, deltas, auth refusals and the slow-consumer close."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import normalize, parse_envelope
from bridge.fanout import protocol as p
from bridge.fanout.queue import QueueLimits
from bridge.fanout.relay import LiveRelay
from bridge.store.chat_sessions import LeaseStore
from bridge.store.writes import EventStore
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node

SID = "ses_fanout_a"
OTHER = "ses_fanout_b"




@pytest.fixture
def nodes(nodes: Callable[..., Any]) -> Callable[..., Any]:
    """The shared `nodes` (tests/conftest.py), each node on its own engine, like another process."""
    return functools.partial(nodes, own_pool=True)


async def connect(clients: list[WsClient], node: Node, sessions: list[str] | None = None, **kw: Any) -> WsClient:
    c = await WsClient.connect(node.url, node.token(sessions), **kw)
    clients.append(c)
    return c


async def test_replay_then_live_has_no_gap_and_no_duplicate_while_writes_race_the_subscribe(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    await node.write_seqs(SID, 1, 2, 3)
    total = 120
    # Gaps in seq are normal upstream (legacy turns burn seqs): write only odd seqs after 3.
    seqs = [s for s in range(4, 4 + 2 * total) if s % 2 == 1]

    async def writer() -> None:
        for i in range(0, len(seqs), 3):
            await node.write_seqs(SID, *seqs[i : i + 3])
            await asyncio.sleep(0)

    afters = [None, 0, 2, 3, 7, 15]
    subscribers = [await connect(clients, node) for _ in afters]
    write_task = asyncio.create_task(writer())
    for c, after in zip(subscribers, afters, strict=True):
        await c.subscribe(SID, after)
        await asyncio.sleep(0.01)  # spread the subscribes over the write burst (not a wait for a condition)
    await write_task
    everything = [1, 2, 3, *seqs]
    for c, after in zip(subscribers, afters, strict=True):
        expected = [s for s in everything if after is None or s > after]
        await c.wait_for("event", seq=everything[-1])
        assert c.seqs(SID) == expected
        sub = c.of("subscribed")[0]
        # `complete` is false only when `after` was beyond the stored head at subscribe time (the
        # writes race the subscribes, so which of the late `after`s were ahead is not fixed).
        assert sub["complete"] is (after is None or after <= sub["head"])
        assert c.of("caught_up")[0]["seq"] >= (after if after is not None else -1)


async def test_event_message_carries_normalized_fields_and_raw_data(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    await node.write_seqs(SID, 1)
    c = await connect(clients, node, [SID])
    await c.subscribe(SID, id="r1")
    ev = await c.wait_for("event", seq=1)
    sub = c.of("subscribed")[0]
    assert sub["id"] == "r1" and sub["head"] == 1
    assert ev["event_type"] == "session.next.text.ended" and ev["kind"] == "text:end"
    # The text travels once, in fields.text; data keeps every other upstream key.
    assert ev["fields"]["text"] == "t1" and "text" not in ev["data"]
    assert ev["data"]["sessionID"] == SID
    assert ev["event_id"].startswith("evt_")


async def test_durable_events_written_by_another_process_arrive_through_notify(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    writer: Node = await nodes()
    reader: Node = await nodes()
    a = await connect(clients, reader)
    b = await connect(clients, writer)
    await a.subscribe(SID)
    await b.subscribe(SID)
    await a.wait_for("caught_up")
    await b.wait_for("caught_up")
    for s in range(1, 31, 3):
        await writer.write_seqs(SID, s, s + 1, s + 2)
    await a.wait_for("event", seq=30)
    await b.wait_for("event", seq=30)
    assert a.seqs() == b.seqs() == list(range(1, 31))


async def test_a_pending_permission_is_seen_by_a_page_opened_later_and_replies_update_it(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    fan = LiveRelay(node.hub, node.store)
    live = await connect(clients, node)
    await live.subscribe(SID)
    await live.wait_for("caught_up")
    asked = {"id": "evt_p1", "type": "permission.v2.asked", "data": {
        "id": "per_1", "sessionID": SID, "action": "bash", "resources": ["touch x"], "save": ["touch x"],
        "source": {"type": "tool", "messageID": "msg_1", "callID": "call_1"}}}
    await fan.on_live_event(normalize(parse_envelope(asked)))
    msg = await live.wait_for("permission", request_id="per_1")
    assert msg["state"] == "asked" and msg["action"] == "bash" and msg["call_id"] == "call_1"
    assert msg["data"]["resources"] == ["touch x"]

    later = await connect(clients, node)
    await later.subscribe(SID)
    pending = await later.wait_for("permission", request_id="per_1")
    assert pending["state"] == "asked"
    assert later.messages.index(pending) > later.messages.index(later.of("caught_up")[0])

    replied = {"id": "evt_p2", "type": "permission.v2.replied",
               "data": {"sessionID": SID, "requestID": "per_1", "reply": "once"}}
    await fan.on_live_event(normalize(parse_envelope(replied)))
    assert (await live.wait_for("permission", state="replied"))["reply"] == "once"
    after_reply = await connect(clients, node)
    await after_reply.subscribe(SID)
    await after_reply.wait_for("caught_up")
    await after_reply.send(op="ping", id=1)
    await after_reply.wait_for("pong", id=1)  # everything the subscribe sends is before the pong
    assert after_reply.of("permission") == []


async def test_deltas_carry_the_seq_of_the_last_durable_event_sent(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    await node.write_seqs(SID, 1, 2)
    c = await connect(clients, node)
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    delta = {"id": "evt_d", "type": "session.next.text.delta", "data": {
        "sessionID": SID, "assistantMessageID": "msg_m", "textID": "text-0", "delta": "Hel"}}
    node.hub.publish_delta(SID, normalize(parse_envelope(delta)))
    d = await c.wait_for("delta")
    assert d == {"type": "delta", "session": SID, "kind": "delta:text", "after_seq": 2,
                 "assistant_message_id": "msg_m", "part_id": "text-0", "delta": "Hel"}
    node.hub.publish_delta(OTHER, normalize(parse_envelope(delta)))  # not subscribed: not sent
    await c.send(op="ping")
    await c.wait_for("pong")
    assert len(c.of("delta")) == 1


async def test_unsubscribe_ping_bad_messages_and_the_subscription_limit(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    c = await connect(clients, node)
    hello = await c.wait_for("hello")
    assert hello["max_subscriptions"] == p.MAX_SUBSCRIPTIONS and hello["sessions"] is None
    await c.ws.send_str("not json")
    assert (await c.wait_for("error"))["code"] == "bad_message"
    await c.send(op="subscribe", session=SID, after=-1, id="x")
    assert (await c.wait_for("error", id="x"))["code"] == "bad_message"
    await c.send(op="unsubscribe", session=SID, id="u0")
    assert (await c.wait_for("error", id="u0"))["code"] == "not_subscribed"
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    await c.send(op="unsubscribe", session=SID, id="u1")
    await c.wait_for("unsubscribed", id="u1")
    await node.write_seqs(SID, 1)
    await c.send(op="ping", id="p")
    await c.wait_for("pong", id="p")
    for i in range(p.MAX_SUBSCRIPTIONS):
        await c.subscribe(f"ses_{i}")
    await c.subscribe("ses_one_too_many", id="over")
    assert (await c.wait_for("error", id="over", timeout=60))["code"] == "too_many_subscriptions"
    assert c.seqs(SID) == []  # unsubscribed before seq 1 was written
    assert node.warmed[0] == SID


async def test_a_message_over_the_size_limit_closes_with_1009(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    c = await connect(clients, node)
    await c.ws.send_str("x" * (p.MAX_CLIENT_MESSAGE_BYTES + 1))
    assert await c.wait_closed() == p.CLOSE_MESSAGE_TOO_BIG


# --- auth ------------------------------------------------------------------------------------------------


async def test_auth_refusals_have_their_documented_codes_and_leak_nothing(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes(allowed_origins=frozenset({"https://chat.example"}))
    await node.write_seqs(SID, 1, 2)
    await node.write_seqs(OTHER, 1)
    from bridge.auth import mint_token

    cases = {
        "no token": (None, p.CLOSE_UNAUTHORIZED, "missing"),
        "bad signature": (mint_token("t" * 48, "it-upstream", None, 600), p.CLOSE_UNAUTHORIZED, "invalid"),
        "garbage": ("abc.def.ghi", p.CLOSE_UNAUTHORIZED, "invalid"),
        "other upstream": (mint_token("s" * 48, "elsewhere", None, 600), p.CLOSE_UNAUTHORIZED, "wrong_upstream"),
        "expired": (mint_token("s" * 48, "it-upstream", None, 60, now=time.time() - 120),
                    p.CLOSE_TOKEN_EXPIRED, "expired"),
    }
    for name, (token, code, reason) in cases.items():
        c = await WsClient.connect(node.url, token)
        clients.append(c)
        assert await c.wait_closed() == code, name
        assert c.ws.close_code == code
        assert c.messages == [], name  # not even the hello
        del reason

    # Authorization: Bearer works as well as ?token=.
    c = await WsClient.connect(node.url, headers={"Authorization": f"Bearer {node.token([SID])}"})
    clients.append(c)
    await c.subscribe(OTHER, id="o")
    err = await c.wait_for("error", id="o")
    assert err["code"] == "forbidden"
    await c.subscribe(SID, id="s")
    await c.wait_for("caught_up", session=SID)
    assert c.of("event", OTHER) == [] and c.seqs(SID) == [1, 2]

    async with aiohttp.ClientSession() as http:
        r = await http.get(node.url + "/v1/ws", headers={
            "Origin": "https://evil.example", "Connection": "Upgrade", "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert r.status == 403
        assert (await r.json())["error"]["code"] == "bad_origin"
    good = await WsClient.connect(node.url, node.token(), headers={"Origin": "https://chat.example"})
    clients.append(good)
    await good.wait_for("hello")


async def test_the_connection_is_closed_with_4402_when_the_token_expires(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    c = await WsClient.connect(node.url, node.token([SID], ttl=1.5))
    clients.append(c)
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    assert await c.wait_closed(timeout=20) == p.CLOSE_TOKEN_EXPIRED
    assert c.of("error")[-1]["code"] == "token_expired"


# --- slow consumer ---------------------------------------------------------------------------------------


async def test_a_slow_client_is_closed_with_4429_while_a_normal_client_misses_nothing(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes(limits=QueueLimits(max_messages=200, max_bytes=1024 * 1024))
    normal = await connect(clients, node)
    slow = await connect(clients, node, read=False)  # subscribes, then never reads
    await normal.subscribe(SID)
    await slow.subscribe(SID)
    await normal.wait_for("caught_up")
    total, size = 800, 32 * 1024  # ~26 MB: more than every socket buffer on the way
    started = time.monotonic()
    commit_times: list[float] = []
    for s in range(1, total + 1, 5):
        t0 = time.monotonic()
        await node.write_seqs(SID, *range(s, s + 5), text_size=size)
        commit_times.append(time.monotonic() - t0)
        await asyncio.sleep(0.002)  # an upstream's pace (a rate, not a wait for a condition)
    ingest_s = time.monotonic() - started
    await normal.wait_for("event", seq=total, timeout=60)
    assert normal.seqs(SID) == list(range(1, total + 1))
    # Now the slow client reads what reached its socket: a prefix, the error with the resume point, 4429.
    slow.start_reading()
    assert await slow.wait_closed(timeout=30) == p.CLOSE_SLOW_CONSUMER
    got = slow.seqs(SID)
    err = slow.of("error")[-1]
    assert err["code"] == "slow_consumer"
    assert got == list(range(1, len(got) + 1)) and len(got) < total
    assert err["resume"][SID] == got[-1]
    # ... and resumes exactly where it stopped.
    again = await connect(clients, node)
    await again.subscribe(SID, err["resume"][SID])
    await again.wait_for("event", seq=total)
    assert got + again.seqs(SID) == list(range(1, total + 1))
    print(f"\ningest of {total} events x {size} B with a stuck client: {ingest_s:.2f} s, "
          f"max commit {max(commit_times) * 1000:.1f} ms")
    assert max(commit_times) < 5.0


async def test_shutdown_closes_every_socket_with_1001(nodes: Callable[..., Any], clients: list[WsClient]) -> None:
    node: Node = await nodes()
    c = await connect(clients, node)
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    await node.stop()
    assert await c.wait_closed() == p.CLOSE_GOING_AWAY


async def test_commits_made_while_the_listen_connection_was_down_are_still_delivered(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine
) -> None:
    from sqlalchemy import text

    writer: Node = await nodes()
    reader: Node = await nodes()
    c = await connect(clients, reader)
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    await writer.write_seqs(SID, 1, 2)
    await c.wait_for("event", seq=2)
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE application_name = 'opencode-bridge-listen'"))
        await conn.commit()
    await writer.write_seqs(SID, 3, 4)  # notifications of these may go nowhere
    await c.wait_for("event", seq=4, timeout=30)
    assert c.seqs(SID) == [1, 2, 3, 4]
    from bridge.fanout import metrics as m

    assert m.NOTIFY_RECONNECTS._value.get() >= 1


def statuses(c: WsClient, session: str = SID) -> list[tuple[str, str | None]]:
    return [(m["status"], m["reason"]) for m in c.of("status", session)]


async def fence(c: WsClient) -> None:
    """Everything the bridge queued for this client before now has been received."""
    await c.send(op="ping", id="fence")
    await c.wait_for("pong", id="fence")


def holder_status(node: Node, engine: AsyncEngine) -> Callable[[str, str, str | None], Awaitable[bool]]:
    """Status writes as the session's holder (`node` claimed it when it wrote), the way the bridge writes."""
    leases = LeaseStore(engine, "it-upstream")

    async def set_status(sid: str, status: str, reason: str | None) -> bool:
        return await leases.set_status(sid, f"owner-{id(node)}", status, reason)

    return set_status


async def one_subscriber(nodes: Callable[..., Any], clients: list[WsClient]) -> tuple[Node, WsClient]:
    """A node holding SID (one event written) and a client subscribed to it, caught up."""
    node: Node = await nodes()
    await node.write_seqs(SID, 1)
    c = await connect(clients, node)
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    return node, c


async def test_a_status_written_by_the_holder_reaches_subscribers_of_every_process_in_order(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine
) -> None:
    holder: Node = await nodes()
    other: Node = await nodes()
    await holder.write_seqs(SID, 1)  # the holder claims the session (owner-<id>) and writes
    a = await connect(clients, holder)
    b = await connect(clients, other)
    for c in (a, b):
        await c.subscribe(SID)
        await c.wait_for("caught_up")
    leases = LeaseStore(engine, "it-upstream")
    owner = f"owner-{id(holder)}"
    written = [("running", None), ("idle", "turn ended"), ("running", None), ("stalled", "no step for 60 s")]
    for status, reason in written:
        assert await leases.set_status(SID, owner, status, reason)
    assert not await leases.set_status(SID, "not-the-holder", "idle", "fenced")  # not written, not sent

    for c in (a, b):
        await c.wait_for("status", status="stalled")
        assert statuses(c) == written


async def test_a_subscriber_never_gets_a_status_older_than_the_one_it_has(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine
) -> None:
    node, c = await one_subscriber(nodes, clients)
    set_status = holder_status(node, engine)
    await set_status(SID, "running", None)
    await c.wait_for("status", status="running")
    # A notification replayed late (what a LISTEN reconnect's re-read or a slow delivery amounts to):
    node.hub.publish_status(SID, "idle", "old", 0)
    await set_status(SID, "idle", "turn ended")
    await c.wait_for("status", status="idle")
    node.hub.publish_status(SID, "running", "older still", 1)
    await fence(c)
    assert statuses(c) == [("running", None), ("idle", "turn ended")]

    # A page opened now gets the stored status in `subscribed`, and nothing older after it.
    late = await connect(clients, node)
    await late.subscribe(SID)
    await late.wait_for("caught_up")
    assert late.of("subscribed")[0]["status"] == "idle"
    node.hub.publish_status(SID, "running", "older still", 1)
    await fence(late)
    assert statuses(late) == []


async def test_statuses_written_while_the_listen_connection_was_down_are_read_back_on_reconnect(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine
) -> None:
    node, c = await one_subscriber(nodes, clients)
    listen = node._tasks[1]
    listen.cancel()  # the LISTEN connection is gone: these notifications reach nobody here
    with contextlib.suppress(asyncio.CancelledError):
        await listen
    set_status = holder_status(node, engine)
    await set_status(SID, "running", None)
    await set_status(SID, "idle", "turn ended")
    await fence(c)
    assert statuses(c) == []

    node.feed.wake_all()  # what the listener does after every (re)connect
    await c.wait_for("status", status="idle")
    assert statuses(c) == [("idle", "turn ended")]


async def test_a_deletion_is_pushed_once_whoever_records_it(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine
) -> None:
    _node, c = await one_subscriber(nodes, clients)
    for _ in range(3):  # every process sees session.deleted on its own /api/event and records it
        await EventStore(engine, "it-upstream").mark_deleted(SID)
    await c.wait_for("status", status="deleted")
    await fence(c)
    assert [s for s, _ in statuses(c)] == ["deleted"]
