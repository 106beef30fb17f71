"""A session whose follower keeps failing is parked with a reason instead of retried forever; the others
keep flowing; a failure of the environment never parks; an explicit warm un-parks; `/v1/sessions` and
`doctor` show it. Against the fake upstream and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import metrics
from bridge.config import Settings
from bridge.ops.doctor import run_doctor
from bridge.sessions.parking import FailureStreak
from bridge.sessions.supervisor import FollowerSupervisor, SessionHooks
from bridge.store.chat_sessions import ClaimAsk, ClaimOutcome
from bridge.store.reads import AuditReader, SessionFilter
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:parking"
FAST = Settings(upstream_name=UPSTREAM, reconnect_min_s=0.01, reconnect_max_s=0.05, lease_ttl_s=1.0,
                heartbeat_interval_s=0.2, sweep_interval_s=0.2, idle_ttl_s=3600.0, active_poll_s=0.05,
                active_poll_idle_s=0.2)
LIMIT = 3


class FailingClaims(EventStore):
    """Claims of the sessions in `failing` fail with `error` after the real claim (so the lease is ours when
    it fails, the hardest case: parking must give it back); the others of the same batch are taken."""

    def __init__(self, engine: AsyncEngine, error: Exception) -> None:
        super().__init__(engine, UPSTREAM)
        self.error = error
        self.failing: set[str] = set()
        self.failures = 0

    async def claim_many(self, asks: Sequence[ClaimAsk], owner: str, **kw: Any) -> list[ClaimOutcome]:
        taken = await super().claim_many(asks, owner, **kw)
        self.failures += sum(1 for a in asks if a.session_id in self.failing)
        return [self.error if a.session_id in self.failing else t for a, t in zip(asks, taken, strict=True)]


async def turn(fake: FakeUpstream, sid: str) -> None:
    fake.add_session(sid)
    await fake.append(sid, "session.next.prompt.admitted", {"messageID": "m", "prompt": {"text": "hi"}})
    await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "a", "textID": "t", "text": "x"})


async def mirrored(store: EventStore, fake: FakeUpstream, sid: str) -> bool:
    return await stored_ids(store, sid) == [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]


@contextlib.asynccontextmanager
async def running(store: EventStore, client: UpstreamClient, **settings: Any) -> AsyncIterator[FollowerSupervisor]:
    sup = FollowerSupervisor(store, client, replace(FAST, **settings), "host:1:park",
                             hooks=SessionHooks(failure_streak=lambda: FailureStreak(LIMIT, 60.0)))
    async with sup.started():
        yield sup


@pytest_asyncio.fixture
async def failing(engine: AsyncEngine) -> FailingClaims:
    return FailingClaims(engine, ValueError("claim exploded (test)"))


async def test_a_session_whose_claim_always_fails_is_parked_with_its_reason_and_others_keep_flowing(
    fake: FakeUpstream, fake_client: UpstreamClient, failing: FailingClaims, engine: AsyncEngine
) -> None:
    await turn(fake, "ses_bad")
    await turn(fake, "ses_ok")
    failing.failing.add("ses_bad")
    parked_before = metrics.SESSIONS_PARKED._value.get()
    async with running(failing, fake_client) as sup:
        assert sup.warm("ses_bad", reason="listed")
        assert sup.warm("ses_ok", reason="listed")
        await wait_until(lambda: "ses_bad" in sup.parked(), 10, 0.02, message="parked")
        assert failing.failures == LIMIT and "ses_bad" not in sup.warm_sessions()
        await wait_until(lambda: mirrored(failing, fake, "ses_ok"), 10, 0.05, message="the other one flows")

        row = await failing.get_session("ses_bad")
        assert row is not None and row.status == "parked" and row.lease_owner is None  # lease given back
        assert "ValueError: claim exploded (test)" in (row.status_reason or "")
        assert metrics.SESSIONS_PARKED._value.get() == parked_before + 1
        # Visible where operators look: /v1/sessions?status=parked and doctor.
        listed = await AuditReader(engine, UPSTREAM).sessions(SessionFilter(status="parked"))
        assert [(r["session_id"], r["status_reason"]) for r in listed] == [("ses_bad", row.status_reason)]

        # Hints, the poller and the sweep leave it alone: no further attempt.
        assert not sup.warm("ses_bad", reason="session.next.text.delta")
        assert not sup.warm("ses_bad", reason="active")
        await asyncio.sleep(3 * FAST.sweep_interval_s)  # several sweeps: a span of time, not a condition
        assert failing.failures == LIMIT

        # Fixed, then asked for explicitly (a subscriber, a request): followed again, status back to idle.
        failing.failing.clear()
        assert sup.warm("ses_bad", reason="subscriber")
        await wait_until(lambda: mirrored(failing, fake, "ses_bad"), 10, 0.05, message="un-parked and mirrored")
        assert "ses_bad" not in sup.parked()

        async def not_parked() -> bool:
            r = await failing.get_session("ses_bad")
            return r is not None and r.status != "parked"

        await wait_until(not_parked, 10, 0.05, message="status no longer parked")


async def test_doctor_reports_parked_sessions(database_url: str, failing: FailingClaims,
                                              fake_client: UpstreamClient, fake: FakeUpstream) -> None:
    await turn(fake, "ses_bad")
    failing.failing.add("ses_bad")
    async with running(failing, fake_client) as sup:
        sup.warm("ses_bad", reason="listed")
        await wait_until(lambda: "ses_bad" in sup.parked(), 10, 0.02, message="parked")
    checks = {c.name: c for c in await run_doctor(replace(FAST, upstream_url=fake.url), database_url)}
    parked = checks["parked sessions"]
    assert not parked.ok and "ses_bad" in parked.detail and "claim exploded" in parked.detail and parked.fix


async def test_a_parked_session_stays_parked_after_a_restart(
    fake: FakeUpstream, fake_client: UpstreamClient, failing: FailingClaims
) -> None:
    await turn(fake, "ses_bad")
    failing.failing.add("ses_bad")
    async with running(failing, fake_client) as sup:
        sup.warm("ses_bad", reason="listed")
        await wait_until(lambda: "ses_bad" in sup.parked(), 10, 0.02, message="parked")
    failing.failing.clear()
    async with running(failing, fake_client) as again:
        assert "ses_bad" in again.parked()
        assert not again.warm("ses_bad", reason="new_events")  # discovery would find it: still left alone


async def test_an_id_of_the_wrong_shape_is_never_warmed_so_nothing_is_claimed_or_retried(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    # NUL (PostgreSQL text cannot hold it), a path, a wrong prefix: refused at warm(), the one entry point
    # of every trigger (subscriber, active poll, discovery, live hint), before any claim or URL.
    store = EventStore(engine, UPSTREAM)
    await turn(fake, "ses_ok")
    crashes = metrics.FOLLOWER_CRASHES._value.get()
    async with running(store, fake_client) as sup:
        for bad in ("ses_\x00nul", "x/../ses_ok", "msg_notasession"):
            assert not sup.warm(bad, reason="subscriber")
        sup.warm("ses_ok", reason="listed")
        await wait_until(lambda: mirrored(store, fake, "ses_ok"), 10, 0.05, message="the other one flows")
        assert metrics.FOLLOWER_CRASHES._value.get() == crashes and not sup.parked()
        assert [row.session_id for row in await store.sessions(include_deleted=True)] == ["ses_ok"]


async def test_a_database_outage_is_retried_with_backoff_and_never_parks(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    outage = FailingClaims(engine, ConnectionRefusedError("database away (test)"))
    await turn(fake, "ses_A")
    outage.failing.add("ses_A")
    async with running(outage, fake_client) as sup:
        sup.warm("ses_A", reason="listed")
        await wait_until(lambda: outage.failures >= 3 * LIMIT, 10, 0.02, message="failing past the ceiling")
        assert "ses_A" in sup.warm_sessions() and not sup.parked()
        outage.failing.clear()
        await wait_until(lambda: mirrored(outage, fake, "ses_A"), 10, 0.05, message="mirrored after the outage")


async def test_a_cursor_the_upstream_refuses_parks_the_session_instead_of_rewarming_it_on_every_hint(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, UPSTREAM)
    await turn(fake, "ses_A")
    fake.fail_status["history"] = 400  # the upstream refuses our cursor: retrying cannot help
    async with running(store, fake_client) as sup:
        assert sup.warm("ses_A", reason="listed")
        await wait_until(lambda: "ses_A" in sup.parked(), 10, 0.02, message="parked")
        assert "bad_cursor" in sup.parked()["ses_A"]
        assert not sup.warm("ses_A", reason="session.next.text.delta")  # the next live hint: left alone
        row = await store.get_session("ses_A")
        assert row is not None and row.status == "parked" and row.lease_owner is None
