"""An OpenCode 2.x session mirrored into PostgreSQL through the 2.x driver (`PortFollower` on `Gen2Driver`,
against the fake 2.x serve on a real socket): nothing lost or duplicated across dropped connections, reads
that fail upstream, seq gaps and a follower killed mid-stream; the WebSocket frames of a 2.x conversation
are those of the equivalent 1.x conversation (kinds and fields; ids and the upstream `data` differ)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from sqlalchemy import text as text_sql
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.fanout import protocol as p
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerSettings
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.port_follower import PortFollower, PortSettings
from bridge.upstream.store_sink import StoreSink
from tests.support.fake_gen2 import FakeGen2Serve
from tests.support.fake_upstream import FakeUpstream
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:gen2"
SID = "ses_g2mirror0000000000000001"


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[FakeGen2Serve]:
    s = FakeGen2Serve()
    await s.start()
    yield s
    await s.stop()


@pytest_asyncio.fixture
async def driver(serve: FakeGen2Serve) -> AsyncIterator[Gen2Driver]:
    async with UpstreamHttp(serve.url, "opencode", "pw") as http:
        yield Gen2Driver(http)


async def start(store: EventStore, driver: Gen2Driver, sid: str) -> tuple[PortFollower, asyncio.Task[FollowerExit]]:
    epoch, cursor = await store.claim(sid, "test-owner")
    f = PortFollower(driver, sid, StoreSink(store, sid, epoch), cursor, PortSettings(0.01, 0.05))
    return f, asyncio.create_task(f.run())


async def mirrored(store: EventStore, serve: FakeGen2Serve, sid: str) -> bool:
    return await stored_ids(store, sid) == [(e["durable"]["seq"], e["id"]) for e in serve.sessions[sid].events]


async def text(serve: FakeGen2Serve, sid: str, i: int, seq: int | None = None) -> None:
    await serve.append(sid, "session.text.ended", {"assistantMessageID": "msg_a", "ordinal": i, "text": f"t{i}"},
                       seq=seq)


async def test_nothing_lost_or_duplicated_across_drops_failures_and_gaps(
        engine: AsyncEngine, serve: FakeGen2Serve, driver: Gen2Driver) -> None:
    store = EventStore(engine, UPSTREAM)
    serve.add_session(SID)
    for i in range(3):
        await text(serve, SID, i)
    follower, task = await start(store, driver, SID)
    await wait_until(lambda: mirrored(store, serve, SID), 10, 0.02, message="first replay")
    serve.drop_connections()  # the serve killed mid-stream
    await text(serve, SID, 3)
    await text(serve, SID, 4, seq=20)  # seqs jump
    serve.fail_next_log(SID)  # the next read ends with the failure event after one event
    await text(serve, SID, 5)
    serve.drop_connections()
    for i in range(6, 9):
        await text(serve, SID, i)
    await wait_until(lambda: mirrored(store, serve, SID), 10, 0.02, message="mirror after the faults")
    assert [seq for seq, _ in await stored_ids(store, SID)] == [0, 1, 2, 3, 4, 20, 21, 22, 23, 24]
    assert follower.reconnects >= 2 and serve.log_reads >= 3
    follower.stop()
    assert await asyncio.wait_for(task, 5) is FollowerExit.STOPPED


async def test_a_killed_follower_is_resumed_from_the_stored_cursor_by_its_successor(
        engine: AsyncEngine, serve: FakeGen2Serve, driver: Gen2Driver) -> None:
    store = EventStore(engine, UPSTREAM)
    serve.add_session(SID)
    for i in range(5):
        await text(serve, SID, i)
    _, task = await start(store, driver, SID)
    await wait_until(lambda: mirrored(store, serve, SID), 10, 0.02, message="first replay")
    task.cancel()  # as a kill -9 would: nothing of the follower runs on
    with contextlib.suppress(asyncio.CancelledError):
        await task
    for i in range(5, 9):
        await text(serve, SID, i)
    before = serve.log_reads
    follower, task = await start(store, driver, SID)  # the successor claims the session: a new epoch
    await wait_until(lambda: mirrored(store, serve, SID), 10, 0.02, message="mirror by the successor")
    assert serve.log_reads == before + 1  # one read, from the stored cursor: nothing read twice
    follower.stop()
    await asyncio.wait_for(task, 5)


async def test_an_unknown_session_ends_gone(engine: AsyncEngine, driver: Gen2Driver) -> None:
    store = EventStore(engine, UPSTREAM)
    _, task = await start(store, driver, "ses_nothere000000000000000001")
    assert await asyncio.wait_for(task, 5) is FollowerExit.GONE


# -- frames: a client does not care which generation the serve is --------------------------------------

TOKENS = {"input": 10, "output": 5, "reasoning": 1, "cache": {"read": 2, "write": 0}}
MODEL = {"id": "mock-1", "providerID": "mock"}
IDS = ("message_id", "assistant_message_id", "part_id", "call_id", "timestamp_ms", "request_id")


def conversation(gen: int) -> list[tuple[str, dict[str, Any]]]:
    """The same turn in each generation's vocabulary (docs/upstream.md §4; bridge.events.gen2)."""
    a = {"assistantMessageID": "msg_a"}
    if gen == 1:
        return [("session.next.prompt.admitted", {"messageID": "msg_u", "prompt": {"text": "hi"}, "delivery": "steer"}),
                ("session.next.step.started", {**a, "agent": "build", "model": MODEL}),
                ("session.next.text.started", {**a, "textID": "prt_1"}),
                ("session.next.text.ended", {**a, "textID": "prt_1", "text": "hello"}),
                ("session.next.tool.input.started", {**a, "callID": "c1", "name": "bash"}),
                ("session.next.tool.input.ended", {**a, "callID": "c1", "text": "{}"}),
                ("session.next.step.ended", {**a, "finish": "stop", "cost": 0.5, "tokens": TOKENS}),
                ("session.next.model.switched", {"model": MODEL})]
    return [("session.input.admitted", {"inputID": "msg_u", "input": {"text": "hi", "delivery": "steer"}}),
            ("session.step.started", {**a, "agent": "build", "model": MODEL}),
            ("session.text.started", {**a, "ordinal": 0}),
            ("session.text.ended", {**a, "ordinal": 0, "text": "hello"}),
            ("session.tool.input.started", {**a, "callID": "c1", "name": "bash"}),
            ("session.tool.input.ended", {**a, "callID": "c1", "text": "{}"}),
            ("session.step.ended", {**a, "finish": "stop", "cost": 0.5, "tokens": TOKENS}),
            ("session.model.selected", {"model": MODEL})]


def client_view(frames: list[tuple[int, str]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for _, raw in frames:
        msg = json.loads(raw)
        out.append((msg["kind"], {k: v for k, v in msg["fields"].items() if k not in IDS}))
    return out


async def frames_of(engine: AsyncEngine, store: EventStore, sid: str) -> tuple[list[Any], list[Any]]:
    fan = FanoutStore(engine, store.upstream)
    live = p.event_frames(sid, await fan.events_after(sid, -1, 1000))
    replay = p.replay_frames(sid, await fan.frames_after(sid, -1, 1000))
    assert [json.loads(f) for _, f in live] == [json.loads(f) for _, f in replay]  # both paths alike
    return live, replay


async def test_fan_out_frames_are_the_same_for_an_equivalent_conversation_of_either_generation(
        engine: AsyncEngine, serve: FakeGen2Serve, driver: Gen2Driver) -> None:
    store = EventStore(engine, UPSTREAM)
    serve.add_session(SID)
    for type_, data in conversation(2):
        await serve.append(SID, type_, data)
    follower, task = await start(store, driver, SID)
    await wait_until(lambda: mirrored(store, serve, SID), 10, 0.02, message="2.x mirror")
    follower.stop()
    await task

    one = "ses_g1mirror0000000000000001"
    fake = FakeUpstream()
    await fake.start()
    try:
        fake.add_session(one)
        for type_, data in conversation(1):
            await fake.append(one, type_, data)
        async with UpstreamClient(fake.url) as client:
            epoch, cursor = await store.claim(one, "test-owner")
            f1 = DurableFollower(one, client, StoreSink(store, one, epoch), cursor, FollowerSettings(upstream=UPSTREAM))
            t1 = asyncio.create_task(f1.run())
            want = [(e["durable"]["seq"], e["id"]) for e in fake.sessions[one].events]
            await wait_until(lambda: _equal(store, one, want), 10, 0.02, message="1.x mirror")
            t1.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t1
    finally:
        await fake.stop()

    two_frames, _ = await frames_of(engine, store, SID)
    one_frames, _ = await frames_of(engine, store, one)
    two_view = client_view(two_frames)[1:]  # 2.x's log starts with session.created (seq 0), 1.x's at 1
    assert client_view(two_frames)[0][0] == "session:created"
    assert two_view == client_view(one_frames)
    assert [k for k, _ in two_view][:4] == ["prompt:admitted", "step:start", "text:start", "text:end"]


async def _equal(store: EventStore, sid: str, want: list[tuple[int, str]]) -> bool:
    return await stored_ids(store, sid) == want


async def test_a_bad_frame_in_a_log_is_kept_with_its_reason_and_nothing_else_is_lost(
        engine: AsyncEngine, serve: FakeGen2Serve, driver: Gen2Driver) -> None:
    store = EventStore(engine, UPSTREAM)
    serve.add_session(SID)
    await text(serve, SID, 0)
    serve.sessions[SID].raw_next.append(b'data: {"id":"evt_bad","type":\n\n')  # cut JSON
    follower, task = await start(store, driver, SID)
    await text(serve, SID, 1)
    await wait_until(lambda: mirrored(store, serve, SID), 10, 0.02, message="mirror around a bad frame")

    async def rejected() -> list[tuple[str, str]]:
        async with engine.connect() as conn:
            rows = await conn.execute(text_sql("select reason, raw from chat_event_rejects where session_id = :s"),
                                      {"s": SID})
            return [(str(r), str(w)) for r, w in rows]

    got = await wait_until(rejected, 10, 0.02, message="the bad frame kept")
    assert got == [("bad_json", '{"id":"evt_bad","type":')]
    follower.stop()
    await task
