"""One cursor, two sources (docs/mirror.md) end to end against the fake upstream and a real PostgreSQL: the
supervisor, the `/global/event` reader and its dispatch table wired as the daemon wires them. Every test
ends with the stored (seq, event_id) equal to the fake's sync log, legacy events included."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge import metrics
from bridge.config import Settings
from bridge.dispatch import LiveDispatch
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.chat_sessions import LeaseStore
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import FakeUpstream
from tests.support.status_listener import status_listener
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:1"
SID = "ses_A"
FAST = Settings(upstream_name=UPSTREAM, reconnect_min_s=0.01, reconnect_max_s=0.1, lease_ttl_s=1.0,
                heartbeat_interval_s=0.2, sweep_interval_s=0.2, idle_ttl_s=3600.0, stall_timeout_s=30.0,
                active_poll_s=0.05, active_poll_idle_s=0.2, durable_stall_s=0.5)
Statuses = list[tuple[str, str, str | None]]


@dataclass
class Bridge:
    sup: FollowerSupervisor
    live: LiveStream
    tasks: list[asyncio.Task[None]]

    async def stop(self) -> None:
        self.sup.stop()
        self.tasks[1].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*self.tasks), 15)


@pytest_asyncio.fixture
async def statuses(database_url: str) -> AsyncIterator[Statuses]:
    seen: Statuses = []
    async with status_listener(database_url, UPSTREAM, lambda n: seen.append((n.session_id, n.status, n.reason))):
        yield seen


@pytest_asyncio.fixture
async def start(engine: AsyncEngine, fake: FakeUpstream, fake_client: UpstreamClient,
                statuses: Statuses) -> AsyncIterator[Callable[..., Any]]:
    made: list[Bridge] = []

    async def make(owner: str = "host:1:a", store: EventStore | None = None, settings: Settings = FAST) -> Bridge:
        sup = FollowerSupervisor(store or EventStore(engine, UPSTREAM), fake_client, settings, owner)
        live = LiveStream(fake_client, LiveDispatch(sessions=sup), reconnect_min_s=0.01, reconnect_max_s=0.05,
                          heartbeat_timeout_s=30)
        tasks = [asyncio.create_task(sup.run())]
        await wait_until(lambda: sup.running, 10, 0.01, message="supervisor running")
        tasks.append(asyncio.create_task(live.run()))
        await wait_until(live.connected.is_set, 10, 0.01, message="live connected")
        b = Bridge(sup, live, tasks)
        made.append(b)
        return b

    yield make
    for b in made:
        if not all(t.done() for t in b.tasks):
            await b.stop()


async def legacy_turn(fake: FakeUpstream, sid: str, n: int = 1, *, live: bool = True) -> None:
    """A legacy text turn as the CLI drives it (docs/upstream.md §16): whole messages and parts, re-sent."""
    user, asst, part = f"msg_u{n}", f"msg_a{n}", f"prt_t{n}"
    ap = fake.append_legacy
    await ap(sid, "message.updated", {"info": {"id": user, "role": "user", "sessionID": sid}}, live=live)
    await ap(sid, "message.part.updated", {"part": {"id": f"prt_u{n}", "type": "text", "text": "hi",
                                                    "messageID": user, "sessionID": sid}}, live=live)
    await ap(sid, "message.updated", {"info": {"id": asst, "role": "assistant", "parentID": user,
                                               "sessionID": sid, "time": {"created": 1}}}, live=live)
    await ap(sid, "message.part.updated", {"part": {"id": f"prt_s{n}", "type": "step-start",
                                                    "messageID": asst, "sessionID": sid}}, live=live)
    for grown in ("Hel", "Hello"):
        await ap(sid, "message.part.updated", {"part": {"id": part, "type": "text", "text": grown,
                                                        "messageID": asst, "sessionID": sid,
                                                        "time": {"start": 1}}}, live=live)
    await ap(sid, "message.part.updated", {"part": {"id": part, "type": "text", "text": "Hello", "messageID": asst,
                                                    "sessionID": sid, "time": {"start": 1, "end": 2}}}, live=live)
    await ap(sid, "message.part.updated", {"part": {"id": f"prt_f{n}", "type": "step-finish", "reason": "stop",
                                                    "cost": 0, "tokens": {"input": 5, "output": 2},
                                                    "messageID": asst, "sessionID": sid}}, live=live)
    await ap(sid, "session.updated", {"info": {"id": sid, "title": f"Mock title {n}"}}, live=live)


async def v2_turn(fake: FakeUpstream, sid: str) -> None:
    await fake.append(sid, "session.next.prompt.admitted", {"messageID": "msg_v", "prompt": {"text": "hi"}})
    await fake.append(sid, "session.next.step.started", {"assistantMessageID": "msg_w"})
    await fake.append(sid, "session.next.step.ended", {"assistantMessageID": "msg_w", "finish": "stop"}, version=2)


async def _eq(value: Any, want: object) -> bool:
    return bool(await value == want)


def log_ids(fake: FakeUpstream, sid: str) -> list[tuple[int, str]]:
    return [(i["seq"], i["id"]) for i in fake.sessions[sid].log]


async def mirrored(store: EventStore, fake: FakeUpstream, sid: str = SID) -> None:
    want = log_ids(fake, sid)

    async def same() -> bool:
        return await stored_ids(store, sid) == want

    await wait_until(same, 15, 0.02, message="stored == sync log")


async def rejects(engine: AsyncEngine) -> int:
    async with engine.connect() as c:
        return int((await c.execute(text("select count(*) from chat_event_rejects"))).scalar_one())


async def test_a_durable_batch_above_the_cursor_is_repaired_from_the_sync_log(fake, store, start) -> None:
    fake.add_session(SID)
    b = await start()
    b.sup.warm(SID)
    await v2_turn(fake, SID)
    await mirrored(store, fake)

    def repairs() -> float:  # the batch repairs at once when /global/event showed seq 13 before it came,
        # else it waits for the twins of 4-12 until 13's twin shows they were lost (docs/mirror.md)
        return sum(metrics.SYNC_REPAIRS.labels(cause=c)._value.get() for c in ("stream_ahead", "twin_hole"))

    before, calls = repairs(), fake.sync_calls
    await legacy_turn(fake, SID, live=False)  # nothing on /global/event: only the log has it (4-12)
    await v2_turn(fake, SID)  # the durable stream delivers seq 13 while the cursor is 3
    await mirrored(store, fake)
    assert len(fake.sessions[SID].log) == 15
    assert repairs() == before + 1 and fake.sync_calls == calls + 1
    assert await LeaseStore(store.engine, UPSTREAM).gaps(SID) == []


async def test_a_legacy_only_turn_is_mirrored_from_its_twins_with_few_requests(fake, store, engine, start) -> None:
    fake.add_session(SID, created=True)  # seq 0 is the session's `session.created` (docs/mirror.md "Seq 0")
    b = await start()
    b.sup.warm(SID)
    await wait_until(lambda: fake.durable_requests(SID) == 1, 10, 0.01, message="following")
    calls = fake.sync_calls
    for n in (1, 2, 3):
        await legacy_turn(fake, SID, n)
    await mirrored(store, fake)
    f = b.sup.follower(SID)
    assert f is not None and f.sync.twins_written == 27
    assert fake.sync_calls == calls  # every twin was next in line: no request at all
    async with engine.connect() as c:
        kinds = [r[0] for r in await c.execute(text(
            "select kind from chat_session_events where session_id = :s order by seq"), {"s": SID})]
    assert kinds[:10] == ["session:created", "legacy:message-updated", "prompt:admitted", "step:start",
                          "legacy:part-updated", "text:start", "legacy:part-updated", "text:end", "step:end",
                          "session:updated"]
    assert kinds.count("text:end") == 3  # a grown part ends once per turn

    async def title() -> object:
        async with engine.connect() as c:
            return (await c.execute(text("select title from chat_sessions where session_id = :s"),
                                    {"s": SID})).scalar()

    await wait_until(lambda: _eq(title(), "Mock title 3"), 10, 0.02, message="title stored")


async def test_twins_held_for_a_durable_stream_that_never_brings_the_hole_still_ask_the_log(
        fake, store, start) -> None:
    # docs/mirror.md rule 3: legacy twins above a v2 seq /global/event announced wait for the durable
    # stream (up to the hold), then ask the log. No stall watchdog here: only the hold ends the wait.
    fake.add_session(SID)
    b = await start(settings=replace(FAST, durable_stall_s=600.0))
    b.sup.warm(SID)
    await v2_turn(fake, SID)
    await mirrored(store, fake)
    await wait_until(lambda: fake.durable_requests(SID) == 1, 10, 0.01, message="following")
    holds = metrics.TWIN_HOLDS.labels(outcome="repaired")._value.get()
    repairs = metrics.SYNC_REPAIRS.labels(cause="twin_hole")._value.get()
    calls = fake.sync_calls
    fake.hang_durable_streams()  # silent from now on, never closed
    await fake.append(SID, "session.next.prompt.admitted", {"messageID": "msg_x", "prompt": {"text": "again"}})
    await legacy_turn(fake, SID, 1)  # seqs 5-13: their twins wait above the announced seq 4
    await mirrored(store, fake)
    assert metrics.TWIN_HOLDS.labels(outcome="repaired")._value.get() == holds + 1
    assert metrics.SYNC_REPAIRS.labels(cause="twin_hole")._value.get() == repairs + 1
    assert fake.sync_calls == calls + 1
    assert await LeaseStore(store.engine, UPSTREAM).gaps(SID) == []


async def test_a_global_event_reconnect_repairs_what_was_missed(fake, store, start) -> None:
    fake.add_session(SID)
    b = await start()
    b.sup.warm(SID)
    await legacy_turn(fake, SID, 1)
    await mirrored(store, fake)
    repairs = metrics.SYNC_REPAIRS.labels(cause="live_reconnect")._value.get()
    connections = b.live.connections
    fake.global_paused = True  # the reader is away: these frames are lost
    fake.drop_global()
    await legacy_turn(fake, SID, 2)
    fake.global_paused = False
    await wait_until(lambda: b.live.connections > connections, 10, 0.01, message="reconnected")
    await mirrored(store, fake)
    assert metrics.SYNC_REPAIRS.labels(cause="live_reconnect")._value.get() >= repairs + 1


async def test_a_hole_the_sync_log_lacks_is_a_recorded_gap_skipped(fake, store, start) -> None:
    fake.add_session(SID)
    gaps_before = metrics.SESSION_GAPS._value.get()
    await v2_turn(fake, SID)
    await fake.append_legacy(SID, "session.updated", {"info": {"id": SID}}, in_log=False, live=False)
    await fake.append_legacy(SID, "session.updated", {"info": {"id": SID}}, in_log=False, live=False)
    await v2_turn(fake, SID)
    b = await start()
    b.sup.warm(SID)
    await mirrored(store, fake)
    leases = LeaseStore(store.engine, UPSTREAM)
    await wait_until(lambda: leases.gaps(SID), 10, 0.02, message="gap recorded")
    assert await leases.gaps(SID) == [(4, 5)]
    row = await store.get_session(SID)
    assert row is not None and row.incomplete and row.cursor_seq == 8
    assert metrics.SESSION_GAPS._value.get() == gaps_before + 1


async def test_a_crash_between_the_repair_and_the_durable_write_leaves_no_duplicate(fake, engine, start) -> None:
    fake.add_session(SID)
    await legacy_turn(fake, SID, live=False)
    await v2_turn(fake, SID)  # 1-12
    failed: list[int] = []

    async def die_once(conn: AsyncConnection) -> None:
        # the repair's transaction (rows inserted, cursor not yet moved) dies: rolled back as a whole
        cursor = (await conn.execute(text("select cursor_seq from chat_sessions where session_id = :s"),
                                     {"s": SID})).scalar_one()
        if cursor >= 12 and not failed:
            failed.append(cursor)
            raise ConnectionResetError("killed between the repair and the durable write (test)")

    store = EventStore(engine, UPSTREAM, before_cursor_update=die_once)
    b = await start(store=store)
    b.sup.warm(SID)
    await mirrored(store, fake)
    await wait_until(lambda: fake.durable_requests(SID) == 1, 10, 0.01, message="streaming")
    await legacy_turn(fake, SID, 2, live=False)
    await v2_turn(fake, SID)  # durable 22 above cursor 12 + 1: repair (dies once), then the batch
    await mirrored(store, fake)
    assert failed == [12] and await rejects(engine) == 0
    async with engine.connect() as c:
        n = (await c.execute(text("select count(*) from chat_session_events"))).scalar_one()
    assert n == len(fake.sessions[SID].log) == 24


async def test_an_upstream_retry_is_written_and_pushed_as_retrying(fake, store, statuses, start) -> None:
    fake.add_session(SID)
    b = await start()
    b.sup.warm(SID)
    fake.active = {SID: {"type": "busy"}}
    await v2_turn(fake, SID)
    await mirrored(store, fake)
    fake.publish_global({"directory": "/srv/agent/proj", "payload": {
        "id": "evt_st1", "type": "session.status", "properties": {
            "sessionID": SID, "status": {"type": "retry", "attempt": 1, "message": "Rate limited",
                                         "next": 1796111700000}}}})
    await wait_until(lambda: any(s == "retrying" for _, s, _ in statuses), 10, 0.02, message="pushed")
    reason = next(r for _, s, r in statuses if s == "retrying")
    assert reason is not None and reason.startswith("attempt 1, next in ") and reason.endswith(": Rate limited")
    row = await store.get_session(SID)
    assert row is not None and row.status == "retrying"
    fake.active = {}
    await wait_until(lambda: statuses[-1][1] == "idle", 10, 0.02, message="idle after the turn")


async def test_seeded_turn_state_after_a_restart_ends_a_grown_part_once(fake, store, engine, start) -> None:
    fake.add_session(SID)
    a = await start("host:1:a")
    a.sup.warm(SID)
    await legacy_turn(fake, SID, 1)
    await mirrored(store, fake)
    await a.stop()
    # the same part re-sent again after the restart (a late update): not a second text:end
    await fake.append_legacy(SID, "message.part.updated", {"part": {
        "id": "prt_t1", "type": "text", "text": "Hello", "messageID": "msg_a1", "sessionID": SID,
        "time": {"start": 1, "end": 2}}}, live=False)
    b = await start("host:2:b")
    b.sup.warm(SID)
    await mirrored(store, fake)
    async with engine.connect() as c:
        ends = (await c.execute(text("select count(*) from chat_session_events where kind = 'text:end'"))).scalar()
    assert ends == 1
