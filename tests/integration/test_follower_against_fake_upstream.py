"""The durable follower against a fake upstream (exact capture wire format) and a real PostgreSQL.

Fault injection the real server cannot do on demand: connections cut mid-body, bad frames, a hung
durable stream, 404/400 answers. Every test ends by comparing the stored (seq, event_id) set with the
fake upstream's own history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import metrics
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from bridge.upstream.stall_policy import StallGovernor
from bridge.upstream.store_sink import StoreSink
from tests.support.fake_upstream import FakeUpstream
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:1"


async def turn(fake: FakeUpstream, sid: str, text_: str = "Hello") -> None:
    """One plain text turn's durable events (a-text-turn shape)."""
    await fake.append(sid, "session.next.prompt.admitted", {"messageID": "msg_u", "prompt": {"text": "hi"},
                                                             "delivery": "steer"})
    await fake.append(sid, "session.next.prompted", {"messageID": "msg_u", "prompt": {"text": "hi"},
                                                      "delivery": "steer"})
    await fake.append(sid, "session.next.step.started", {"assistantMessageID": "msg_a", "agent": "build",
                                                          "model": {"id": "mock-1", "providerID": "mock"}})
    await fake.append(sid, "session.next.text.started", {"assistantMessageID": "msg_a", "textID": "text-0"})
    await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "msg_a", "textID": "text-0",
                                                        "text": text_})
    await fake.append(sid, "session.next.step.ended", {"assistantMessageID": "msg_a", "finish": "stop",
                                                        "cost": 0, "tokens": {"input": 1, "output": 1}},
                      version=2)


def upstream_ids(fake: FakeUpstream, sid: str) -> list[tuple[int, str]]:
    return [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]


async def start_follower(store: EventStore, fake_client: UpstreamClient, sid: str,
                         stall_governor: StallGovernor | None = None,
                         **kw: Any) -> tuple[DurableFollower, asyncio.Task[FollowerExit]]:
    epoch, cursor = await store.claim(sid, "test-owner")
    f = DurableFollower(sid, fake_client, StoreSink(store, sid, epoch), cursor, FollowerSettings(
        reconnect_min_s=0.01, reconnect_max_s=0.05, upstream=UPSTREAM, **kw),
        FollowerHooks(stall_governor=stall_governor))
    return f, asyncio.create_task(f.run())


async def stop(task: asyncio.Task[FollowerExit]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def wait_mirrored(store: EventStore, fake: FakeUpstream, sid: str, timeout: float = 10) -> None:
    async def same() -> bool:
        return await stored_ids(store, sid) == upstream_ids(fake, sid)

    await wait_until(same, timeout, 0.02, message=f"stored == upstream history for {sid}")


async def rejects(engine: AsyncEngine) -> list[tuple[str, int | None]]:
    async with engine.connect() as c:
        rows = await c.execute(text("select reason, seq from chat_event_rejects order by id"))
        return [(r[0], r[1]) for r in rows]


async def test_catches_up_from_history_then_follows_the_stream(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    f, task = await start_follower(store, fake_client, "ses_A")
    try:
        await wait_mirrored(store, fake, "ses_A")
        assert fake.history_calls >= 1
        await turn(fake, "ses_A", "second")  # now through the open stream
        await wait_mirrored(store, fake, "ses_A")
        assert f.cursor == 12
        row = await store.get_session("ses_A")
        assert row is not None and row.cursor_seq == 12
    finally:
        await stop(task)


async def test_connection_cut_mid_body_loses_nothing_and_duplicates_nothing(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    _f, task = await start_follower(store, fake_client, "ses_A")
    try:
        for i in range(5):
            await wait_until(lambda: fake.durable_requests("ses_A"), 5, 0.01, message="follower on the stream")
            await fake.append("ses_A", "session.next.prompt.admitted", {"messageID": f"m{i}"})
            await fake.append("ses_A", "session.next.prompted", {"messageID": f"m{i}"})
            # cut while the stream is open with a body in flight, like a killed server (no final chunk)
            await wait_until(lambda: fake.open_durable_streams("ses_A"), 5, 0.01, message="stream sending")
            fake.drop_connections()
            await fake.append("ses_A", "session.next.step.started", {"assistantMessageID": f"a{i}"})
        await turn(fake, "ses_A", "last")
        await wait_mirrored(store, fake, "ses_A")
        assert fake.durable_connects >= 5
    finally:
        await stop(task)


async def test_seq_gaps_do_not_stall_the_follower(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    await fake.append("ses_A", "session.next.prompt.admitted", {"messageID": "m1", "prompt": {"text": "x"}})
    await fake.append("ses_A", "session.next.prompted", {"messageID": "m1"}, seq=17)  # legacy turn burnt 2-16
    f, task = await start_follower(store, fake_client, "ses_A")
    try:
        await wait_mirrored(store, fake, "ses_A")
        await fake.append("ses_A", "session.next.step.started", {"assistantMessageID": "a"}, seq=40)
        await wait_mirrored(store, fake, "ses_A")
        assert f.cursor == 40
    finally:
        await stop(task)


async def test_bad_frames_are_kept_with_a_reason_and_the_stream_goes_on(fake, fake_client, store, engine) -> None:
    fake.add_session("ses_A")
    before = metrics.REJECTS.labels(reason="bad_json")._value.get()
    _f, task = await start_follower(store, fake_client, "ses_A")
    try:
        await turn(fake, "ses_A")
        await wait_mirrored(store, fake, "ses_A")
        await fake.inject_raw("ses_A", b"data: {not json\n\n")
        await fake.inject_raw("ses_A", b"data: [1,2,3]\n\n")
        await fake.inject_raw("ses_A", b'data: {"id":"evt_x","type":"session.next.text.delta","data":{}}\n\n')
        await fake.inject_raw("ses_A", b'data: {"id":"evt_y","type":"session.next.prompted","durable":'
                                       b'{"aggregateID":"ses_OTHER","seq":999,"version":1},"data":{}}\n\n')
        await fake.inject_raw("ses_A", b'data: {"id":"evt_z","type":"session.next.prompted","durable":'
                                       b'{"aggregateID":"ses_A","seq":"7","version":1},"data":{}}\n\n')
        await turn(fake, "ses_A", "after the garbage")
        await wait_mirrored(store, fake, "ses_A")
        got = await wait_until(lambda: rejects(store.engine), 5, 0.02)
        reasons = [r for r, _ in got]
        assert reasons == ["bad_json", "bad_shape", "not_durable", "wrong_session", "bad_durable"]
        assert metrics.REJECTS.labels(reason="bad_json")._value.get() == before + 1
        assert not task.done()
    finally:
        await stop(task)


async def test_unknown_event_type_is_stored_as_unknown_kind(fake, fake_client, store, engine) -> None:
    fake.add_session("ses_A")
    await fake.append("ses_A", "session.next.hologram.projected", {"beam": 3})
    _f, task = await start_follower(store, fake_client, "ses_A")
    try:
        await wait_mirrored(store, fake, "ses_A")
        async with engine.connect() as c:
            kind = (await c.execute(text("select kind from chat_session_events"))).scalar_one()
        assert kind == "unknown"
    finally:
        await stop(task)


async def test_hung_durable_stream_is_restarted_by_the_stall_watchdog(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    f, task = await start_follower(store, fake_client, "ses_A", stall_s=0.3)
    try:
        await turn(fake, "ses_A")
        await wait_mirrored(store, fake, "ses_A")
        await wait_until(lambda: fake.durable_requests("ses_A"), 5, 0.01, message="follower on the stream")
        fake.hang_durable_streams()  # open and silent from now on; /history still tells the truth
        connects = fake.durable_connects
        await turn(fake, "ses_A", "unseen")
        await asyncio.sleep(0.5)  # prove the hung stream delivers nothing by itself (not a wait for a condition)
        assert await stored_ids(store, "ses_A") == upstream_ids(fake, "ses_A")[:6]
        f.notify_seen(12)  # what /api/event would have told us
        await wait_mirrored(store, fake, "ses_A")  # the catch-up after the stall stores it; the stream reopens next
        await wait_until(lambda: fake.durable_connects > connects, 5, 0.01, message="durable stream reopened")
    finally:
        await stop(task)


async def test_deleted_session_ends_the_follower_as_gone(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    _f, task = await start_follower(store, fake_client, "ses_A")
    await wait_mirrored(store, fake, "ses_A")
    await fake.delete("ses_A")
    fake.drop_connections()
    assert await asyncio.wait_for(task, 10) is FollowerExit.GONE
    assert len(await stored_ids(store, "ses_A")) == 6  # history stays


async def test_rejected_cursor_stops_the_follower_without_a_hot_loop(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    fake.fail_status["history"] = 400
    _f, task = await start_follower(store, fake_client, "ses_A")
    assert await asyncio.wait_for(task, 10) is FollowerExit.BAD_CURSOR
    assert fake.history_calls == 1


async def test_a_superseded_follower_writes_nothing_more(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    _f, task = await start_follower(store, fake_client, "ses_A")
    await wait_mirrored(store, fake, "ses_A")
    await store.claim("ses_A", "another-owner", holder_dead=lambda _owner: True)  # epoch moves on
    await turn(fake, "ses_A", "for the new owner")
    assert await asyncio.wait_for(task, 10) is FollowerExit.LEASE_LOST
    assert len(await stored_ids(store, "ses_A")) == 6


async def test_upstream_5xx_is_retried_until_it_recovers(fake, fake_client, store) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    fake.fail_status["history"] = 503
    _f, task = await start_follower(store, fake_client, "ses_A")
    try:
        await wait_until(lambda: fake.history_calls >= 3, 10, 0.01)
        del fake.fail_status["history"]
        await wait_mirrored(store, fake, "ses_A")
    finally:
        await stop(task)


async def test_a_seq_beyond_bigint_is_rejected_and_never_crashes_the_follower(fake, fake_client, store,
                                                                             engine) -> None:
    # Before, the writer raised on it outside the follower's handling: a crash and restart loop.
    fake.add_session("ses_A")
    first = await fake.append("ses_A", "session.next.prompt.admitted", {"messageID": "m1"})
    _f, task = await start_follower(store, fake_client, "ses_A")
    try:
        await wait_until(lambda: fake.durable_requests("ses_A"), 10, 0.01, message="follower on the stream")
        huge = {"id": "evt_huge", "type": "session.next.prompted", "durable": {"aggregateID": "ses_A",
                "seq": 2**63, "version": 1}, "data": {"sessionID": "ses_A", "messageID": "m1"}}
        await fake.inject_raw("ses_A", f"data: {json.dumps(huge)}\n\n".encode())
        second = await fake.append("ses_A", "session.next.step.started", {"assistantMessageID": "a"})

        async def stored() -> bool:
            return await stored_ids(store, "ses_A") == [(1, first["id"]), (2, second["id"])]

        await wait_until(stored, 10, 0.02, message="the events around it stored")
        assert not task.done()
        assert ("bad_durable", None) in await rejects(engine)
    finally:
        await stop(task)
