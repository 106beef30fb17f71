"""The warm-session lifecycle of FollowerSupervisor against the fake upstream and a real PostgreSQL:
one follower per session across supervisors, adoption, hand-off, lease loss, the supersede race, idle GC,
status and legacy gaps. Statuses are observed where every process sees them: `NOTIFY bridge_status`.
Timers are set small; every wait is a condition with a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.config import Settings
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.chat_sessions import LeaseStore
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerSettings
from bridge.upstream.store_sink import StoreSink
from tests.support.fake_upstream import FakeUpstream
from tests.support.status_listener import status_listener
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:1"
FAST = Settings(
    upstream_name=UPSTREAM,
    reconnect_min_s=0.01,
    reconnect_max_s=0.1,
    lease_ttl_s=1.0,
    heartbeat_interval_s=0.2,
    sweep_interval_s=0.2,
    idle_ttl_s=3600.0,
    stall_timeout_s=30.0,
    active_poll_s=0.05,
    active_poll_idle_s=0.2,
)
Statuses = list[tuple[str, str, str | None]]


def taken_over(_owner: str) -> bool:
    """`holder_dead` of a peer that takes a lease away (as after a partition)."""
    return True


@pytest.fixture
def leases(engine: AsyncEngine) -> LeaseStore:
    return LeaseStore(engine, UPSTREAM)


class Running:
    def __init__(self, sup: FollowerSupervisor, task: asyncio.Task[None], statuses: Statuses) -> None:
        self.sup, self.task, self.statuses = sup, task, statuses

    async def stop(self) -> None:
        self.sup.stop()
        await asyncio.wait_for(self.task, 15)


@pytest_asyncio.fixture
async def statuses(database_url: str) -> AsyncIterator[Statuses]:
    """Every status stored for the upstream, in commit order, as the fan-out of any process hears it."""
    seen: Statuses = []
    async with status_listener(database_url, UPSTREAM, lambda n: seen.append((n.session_id, n.status, n.reason))):
        yield seen


@pytest_asyncio.fixture
async def start(store: EventStore, fake_client: UpstreamClient, statuses: Statuses
                ) -> AsyncIterator[Callable[..., Any]]:
    made: list[Running] = []

    async def make(owner: str, **overrides: Any) -> Running:
        sup = FollowerSupervisor(store, fake_client, replace(FAST, **overrides), owner)
        task = asyncio.create_task(sup.run())
        await wait_until(lambda: sup.running, 10, 0.01, message="supervisor running")
        r = Running(sup, task, statuses)
        made.append(r)
        return r

    yield make
    for r in made:
        if not r.task.done():
            await r.stop()


async def turn(fake: FakeUpstream, sid: str, *, end: bool = True) -> None:
    await fake.append(sid, "session.next.prompt.admitted", {"messageID": "msg_u", "prompt": {"text": "hi"}})
    await fake.append(sid, "session.next.prompted", {"messageID": "msg_u", "prompt": {"text": "hi"}})
    await fake.append(sid, "session.next.step.started", {"assistantMessageID": "msg_a"})
    await fake.append(sid, "session.next.text.started", {"assistantMessageID": "msg_a", "textID": "t0"})
    if end:
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "msg_a", "textID": "t0",
                                                            "text": "Hello"})
        await fake.append(sid, "session.next.step.ended", {"assistantMessageID": "msg_a", "finish": "stop"},
                          version=2)


def upstream_ids(fake: FakeUpstream, sid: str) -> list[tuple[int, str]]:
    return [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]


async def wait_mirrored(store: EventStore, fake: FakeUpstream, *sids: str, timeout: float = 15) -> None:
    async def same() -> bool:
        for sid in sids:
            if await stored_ids(store, sid) != upstream_ids(fake, sid):
                return False
        return True

    await wait_until(same, timeout, 0.05, message=f"stored == upstream for {sids}")


async def owner_of(store: EventStore, sid: str) -> str | None:
    row = await store.get_session(sid)
    return None if row is None else row.lease_owner


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


async def test_two_supervisors_never_follow_one_session_twice(fake, store, start) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    a = await start("host:1:a")
    b = await start("host:2:b")
    assert a.sup.warm("ses_A", reason="listed")
    await wait_until(lambda: a.sup.owns("ses_A"), 10, 0.02, message="a owns ses_A")
    b.sup.warm("ses_A", reason="listed")
    await wait_until(lambda: "ses_A" not in b.sup.warm_sessions(), 10, 0.02, message="b refused")
    # A refused trigger is not retried on every live event until the refusal cools down.
    assert not b.sup.warm("ses_A", reason="session.next.text.delta")
    await turn(fake, "ses_A")
    await wait_mirrored(store, fake, "ses_A")
    assert await owner_of(store, "ses_A") == "host:1:a"


async def test_a_clean_shutdown_hands_off_and_a_peer_adopts_at_its_next_sweep(fake, store, start) -> None:
    for sid in ("ses_A", "ses_B"):
        fake.add_session(sid)
        await turn(fake, sid)
    a = await start("host:1:a")
    b = await start("host:2:b")
    a.sup.warm("ses_A")
    a.sup.warm("ses_B")
    await wait_mirrored(store, fake, "ses_A", "ses_B")
    await a.stop()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await wait_until(lambda: b.sup.owns("ses_A") and b.sup.owns("ses_B"), 10, 0.02, message="b adopted both")
    # Handed off, not expired: adoption does not wait for the lease TTL.
    assert loop.time() - t0 < FAST.lease_ttl_s
    await turn(fake, "ses_A")
    await wait_mirrored(store, fake, "ses_A", "ses_B")


async def test_the_orphan_of_a_dead_holder_on_this_host_is_adopted_before_its_lease_expires(
    fake, store, start
) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    dead = f"{socket.gethostname()}:{dead_pid()}:deadbeef0000"
    await store.claim("ses_A", dead, lease_ttl_s=3600)
    b = await start("host:2:b")
    await wait_until(lambda: b.sup.owns("ses_A"), 10, 0.02, message="adopted")
    await wait_mirrored(store, fake, "ses_A")


async def test_the_orphan_of_a_silent_remote_holder_is_adopted_after_its_lease_expires(
    fake, store, start
) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    await store.claim("ses_A", "elsewhere:1:cafe00000000", lease_ttl_s=1.0)
    b = await start("host:2:b")
    assert not b.sup.owns("ses_A")
    await wait_until(lambda: b.sup.owns("ses_A"), 10, 0.02, message="adopted after expiry")
    await wait_mirrored(store, fake, "ses_A")


async def test_a_lost_lease_stops_the_follower_and_it_writes_nothing_more(fake, store, start) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    a = await start("host:1:a")
    a.sup.warm("ses_A")
    await wait_mirrored(store, fake, "ses_A")
    await store.claim("ses_A", "operator", holder_dead=taken_over)  # taken away (a peer after a partition)
    await wait_until(lambda: "ses_A" not in a.sup.warm_sessions(), 10, 0.02, message="follower stopped")
    await turn(fake, "ses_A", end=False)
    assert len(await stored_ids(store, "ses_A")) == 6
    assert await owner_of(store, "ses_A") == "operator"


class GatedSink(StoreSink):
    """Holds its next write until released: a follower that read events and is about to write them."""

    def __init__(self, store: EventStore, sid: str, epoch: int) -> None:
        super().__init__(store, sid, epoch)
        self.waiting = asyncio.Event()
        self.gate = asyncio.Event()

    async def write(self, events: Any, received_at: datetime) -> int:
        if events:
            self.waiting.set()
            await self.gate.wait()
        return await super().write(events, received_at)


@pytest.mark.parametrize("new_owner", ["same-process", "peer-after-expiry"])
async def test_supersede_race_the_old_followers_late_write_is_fenced_and_it_exits(
    fake, fake_client, store, new_owner: str
) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    old_epoch, cursor = await store.claim("ses_A", "host:1:a", lease_ttl_s=0.3)
    old_sink = GatedSink(store, "ses_A", old_epoch)
    old = DurableFollower("ses_A", fake_client, old_sink, cursor,
                          FollowerSettings(reconnect_min_s=0.01, reconnect_max_s=0.05))
    old_task = asyncio.create_task(old.run())
    await asyncio.wait_for(old_sink.waiting.wait(), 10)  # the old one holds the whole turn, unwritten

    owner = "host:1:a" if new_owner == "same-process" else "host:2:b"

    async def claimed() -> tuple[int, int] | None:
        with contextlib.suppress(Exception):
            return await store.claim("ses_A", owner, lease_ttl_s=60)
        return None

    new_epoch, new_cursor = await wait_until(claimed, 10, 0.05, message="new claim")
    assert new_epoch == old_epoch + 1
    new = DurableFollower("ses_A", fake_client, StoreSink(store, "ses_A", new_epoch), new_cursor,
                          FollowerSettings(reconnect_min_s=0.01, reconnect_max_s=0.05))
    new_task = asyncio.create_task(new.run())
    try:
        await wait_mirrored(store, fake, "ses_A")
        old_sink.gate.set()  # the late write
        assert await asyncio.wait_for(old_task, 10) is FollowerExit.LEASE_LOST
        await turn(fake, "ses_A")
        await wait_mirrored(store, fake, "ses_A")
        async with store.engine.connect() as c:
            rejects = (await c.execute(text("select count(*) from chat_event_rejects"))).scalar_one()
        assert rejects == 0
        assert [s for s, _ in await stored_ids(store, "ses_A")] == list(range(1, 13))
    finally:
        new_task.cancel()
        old_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(new_task, old_task, return_exceptions=True)


async def test_idle_gc_releases_and_the_next_activity_warms_again_with_nothing_lost(fake, store, start) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    a = await start("host:1:a", idle_ttl_s=0.5)
    a.sup.warm("ses_A")
    await wait_mirrored(store, fake, "ses_A")
    await wait_until(lambda: "ses_A" not in a.sup.warm_sessions(), 10, 0.02, message="released when idle")
    row = await store.get_session("ses_A")
    assert row is not None and row.lease_owner is None and row.cursor_seq == 6  # history and cursor stay
    # Activity while released: the session shows up in /api/session/active → warmed again.
    fake.active = {"ses_A": {"type": "running"}}
    await turn(fake, "ses_A", end=False)
    await wait_until(lambda: a.sup.owns("ses_A"), 10, 0.02, message="warmed again")
    await wait_mirrored(store, fake, "ses_A")
    assert a.sup.status("ses_A") == ("running", None)


async def test_status_of_a_normal_turn_goes_running_then_idle(fake, store, start) -> None:
    fake.add_session("ses_A")
    a = await start("host:1:a")
    a.sup.warm("ses_A")
    await wait_until(lambda: a.sup.owns("ses_A"), 10, 0.02)
    fake.active = {"ses_A": {"type": "running"}}
    await turn(fake, "ses_A")
    await wait_until(lambda: ("ses_A", "running", None) in a.statuses, 10, 0.02, message="running")
    fake.active = {}

    # A poll that began before `active` was emptied may still say "running" once more after the turn's
    # end made it idle: what holds is where it settles, in memory and in the row.
    async def settled_idle() -> bool:
        row = await store.get_session("ses_A")
        return a.statuses[-1:] == [("ses_A", "idle", None)] and row is not None and row.status == "idle"

    await wait_until(settled_idle, 10, 0.02, message="idle, stored")


async def test_status_of_a_prompt_without_a_step_is_stalled_after_stall_timeout(fake, store, start) -> None:
    fake.add_session("ses_A")
    a = await start("host:1:a", stall_timeout_s=1.0)
    a.sup.warm("ses_A")
    await wait_until(lambda: a.sup.owns("ses_A"), 10, 0.02)
    await fake.append("ses_A", "session.next.prompt.admitted", {"messageID": "m", "prompt": {"text": "x"}})
    await fake.append("ses_A", "session.next.prompted", {"messageID": "m", "prompt": {"text": "x"}})
    await wait_until(lambda: any(s == "stalled" for _, s, _ in a.statuses), 15, 0.05, message="stalled")
    row = await store.get_session("ses_A")
    assert row is not None and row.status == "stalled" and "no step started" in (row.status_reason or "")


async def test_status_of_a_turn_left_open_is_interrupted(fake, store, start) -> None:
    fake.add_session("ses_A")
    a = await start("host:1:a")
    a.sup.warm("ses_A")
    await wait_until(lambda: a.sup.owns("ses_A"), 10, 0.02)
    await turn(fake, "ses_A", end=False)  # the upstream restarted mid-turn: active is empty (§7)
    await wait_until(lambda: any(s == "interrupted" for _, s, _ in a.statuses), 15, 0.05, message="interrupted")
    row = await store.get_session("ses_A")
    assert row is not None and row.status == "interrupted"


async def test_a_new_owner_continues_the_status_of_a_turn_its_predecessor_saw_start(
    fake, store, leases, start
) -> None:
    fake.add_session("ses_A")
    a = await start("host:1:a")
    a.sup.warm("ses_A")
    fake.active = {"ses_A": {"type": "running"}}
    await turn(fake, "ses_A", end=False)
    await wait_until(lambda: ("ses_A", "running", None) in a.statuses, 10, 0.02)
    await wait_mirrored(store, fake, "ses_A")
    await a.stop()
    fake.active = {}  # the turn died with the upstream while nobody followed
    b = await start("host:2:b")
    await wait_until(lambda: any(s == "interrupted" for _, s, _ in b.statuses), 15, 0.05, message="b closes it")


async def test_seqs_the_sync_log_lacks_are_a_gap_that_marks_the_session_incomplete(fake, store, leases,
                                                                                   start) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    fake.sessions["ses_A"].next_seq = 17  # seqs 7-16 exist nowhere, not even in the sync log (docs/mirror.md)
    await turn(fake, "ses_A")
    a = await start("host:1:a")
    a.sup.warm("ses_A")
    await wait_mirrored(store, fake, "ses_A")
    await wait_until(lambda: leases.gaps("ses_A"), 10, 0.05, message="gap recorded")
    assert await leases.gaps("ses_A") == [(7, 16)]
    row = await store.get_session("ses_A")
    assert row is not None and row.incomplete


async def test_interrupt_is_an_explicit_upstream_call_and_release_never_makes_it(store, start) -> None:
    from aiohttp import web

    calls: list[str] = []

    async def interrupt(request: web.Request) -> web.Response:
        calls.append(request.match_info["sid"])
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/api/session/{sid}/interrupt", interrupt)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with UpstreamClient(f"http://127.0.0.1:{port}") as c:
            sup = FollowerSupervisor(store, c, FAST, "host:1:a")
            await sup.release("ses_A")
            assert calls == []
            await sup.interrupt("ses_A")
            assert calls == ["ses_A"]
    finally:
        await runner.cleanup()


async def test_a_lease_we_hold_without_a_follower_is_given_back(fake, store, start) -> None:
    fake.add_session("ses_A")
    await store.claim("ses_A", "host:1:a", lease_ttl_s=60)  # e.g. a claim cancelled right as it committed
    await start("host:1:a")

    async def freed() -> bool:
        return await owner_of(store, "ses_A") is None

    await wait_until(freed, 10, 0.05, message="stray lease released")


class FlakyLeases(LeaseStore):
    """Heartbeats fail while `failing` is set (the database unreachable for this process only, or a
    heartbeat stuck behind a busy pool); counts the heartbeats that went through."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine, UPSTREAM)
        self.failing = False
        self.renewed = 0

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        if self.failing:
            raise ConnectionError("heartbeat refused (test)")
        held = await super().heartbeat(incarnation_id, hostname, pid, ttl_s)
        self.renewed += 1
        return held


async def test_a_heartbeat_outage_past_the_ttl_keeps_the_follower_when_nobody_took_over(
    fake, fake_client, store, engine
) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    leases = FlakyLeases(engine)
    sup = FollowerSupervisor(store, fake_client, FAST, "host:1:a", leases=leases)
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(lambda: sup.running, 10, 0.01)
        sup.warm("ses_A")
        await wait_mirrored(store, fake, "ses_A")
        row = await store.get_session("ses_A")
        assert row is not None
        epoch = row.lease_epoch

        leases.failing = True

        async def lapsed() -> bool:
            return any(c.session_id == "ses_A" and c.lease_expired for c in await leases.adoption_candidates("peer"))

        await wait_until(lapsed, 10, 0.05, message="lease expired during the outage")
        renewed = leases.renewed
        leases.failing = False
        await wait_until(lambda: leases.renewed >= renewed + 2, 10, 0.02, message="heartbeats resumed")

        # Same follower, same epoch: nothing was stopped, re-claimed or re-read.
        assert "ses_A" in sup.warm_sessions()
        row = await store.get_session("ses_A")
        assert row is not None and row.lease_owner == "host:1:a" and row.lease_epoch == epoch
        await turn(fake, "ses_A")
        await wait_mirrored(store, fake, "ses_A")
        row = await store.get_session("ses_A")
        assert row is not None and row.lease_epoch == epoch
    finally:
        sup.stop()
        await asyncio.wait_for(task, 15)


async def test_an_id_the_upstream_does_not_know_yet_is_not_tombstoned_and_is_followed_once_created(
    fake, store, start
) -> None:
    a = await start("host:1:a")
    # A page subscribes to a session its backend is about to create (POST /api/session accepts an id).
    assert a.sup.warm("ses_later", reason="subscriber")
    await wait_until(lambda: "ses_later" not in a.sup.warm_sessions(), 10, 0.02, message="follower ended on 404")
    row = await store.get_session("ses_later")
    assert row is not None and not row.deleted and row.lease_owner is None and row.status != "deleted"

    fake.add_session("ses_later")
    await turn(fake, "ses_later")
    assert a.sup.warm("ses_later", reason="session.created")
    await wait_mirrored(store, fake, "ses_later")


async def test_a_session_deleted_upstream_after_we_stored_it_is_tombstoned_and_never_warmed_again(
    fake, store, start
) -> None:
    fake.add_session("ses_A")
    await turn(fake, "ses_A")
    a = await start("host:1:a")
    a.sup.warm("ses_A")
    await wait_mirrored(store, fake, "ses_A")
    await a.sup.release("ses_A")
    fake.sessions["ses_A"].deleted = True  # a 404 from now on, without the live session.deleted
    assert a.sup.warm("ses_A", reason="request")
    await wait_until(lambda: "ses_A" not in a.sup.warm_sessions(), 10, 0.02, message="follower ended on 404")

    async def tombstoned() -> bool:
        row = await store.get_session("ses_A")
        return row is not None and row.deleted and row.status == "deleted"

    await wait_until(tombstoned, 10, 0.05, message="tombstone written")
    assert not a.sup.warm("ses_A", reason="request")
    assert len(await stored_ids(store, "ses_A")) == 6
