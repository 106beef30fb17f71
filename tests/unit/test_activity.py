"""ActivityTracker: committed batches, `session.status` of /global/event and /api/session/active
observations → status machine → status, gap and title writes, in the order of their causes; only the
holder's writes count. The store is the in-memory twin of the lease store (bridge.store.memory)
holding every lease of the tests; the clock is a variable."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest_asyncio
from structlog.testing import capture_logs

from bridge.events.legacy_shapes import SessionStatus
from bridge.sessions.activity import TURN_SETTLE_S, ActivityTracker
from bridge.sessions.status_machine import Status, TurnTracker
from bridge.store.memory import MemoryLeaseStore
from tests.support.serve_model import Clock
from tests.support.waiting import wait_until

ME = "host:1:me"


def ev(seq: int, kind: str, **data: Any) -> Any:
    env = SimpleNamespace(type=kind.replace(":", "."), data=data)
    return SimpleNamespace(seq=seq, kind=kind, envelope=env)


@pytest_asyncio.fixture
async def parts() -> AsyncIterator[tuple[ActivityTracker, MemoryLeaseStore, Clock]]:
    store, clock = MemoryLeaseStore(), Clock(100.0)
    store.put("ses_A", lease_owner=ME)  # ours
    tracker = ActivityTracker(store, ME, stall_timeout_s=30.0, clock=clock)
    task = asyncio.create_task(tracker.run())
    yield tracker, store, clock
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_gaps_and_statuses_are_written_in_the_order_of_their_causes(parts: Any) -> None:
    tracker, store, clock = parts
    await tracker.resume("ses_A", 0)
    tracker.committed("ses_A", [ev(1, "prompt:admitted"), ev(5, "step:start")])  # 2-4: not in the sync log
    tracker.committed("ses_A", [ev(6, "session:updated", info={"title": "Mock title"})])
    tracker.committed("ses_A", [ev(7, "session:updated", info={"title": "Mock title"})])  # unchanged: once
    clock.now += 1
    tracker.observe_active([], observed_at=clock.now)
    clock.now += TURN_SETTLE_S + 0.5
    tracker.observe_active([], observed_at=clock.now)  # the step stayed open: the turn was cut
    await wait_until(lambda: len(store.journal) == 4, 5, 0.01, message="four writes")
    # a session's statuses in their order; a title goes in the same transaction as the statuses queued
    # with it (bridge.sessions.activity_batch), a gap before them
    assert store.journal[0] == ("gap", "ses_A", 2, 4)
    statuses = [w for w in store.journal if w[0] == "status"]
    assert statuses[0] == ("status", "ses_A", "running", None) and statuses[1][2] == "interrupted"
    assert [w for w in store.journal if w[0] == "title"] == [("title", "ses_A", "Mock title")]
    assert tracker.status("ses_A") is not None and not tracker.wants_polling


async def test_an_upstream_retry_is_a_visible_retrying_status_until_the_turn_goes_on(parts: Any) -> None:
    tracker, store, clock = parts
    await tracker.resume("ses_A", 0)
    tracker.committed("ses_A", [ev(1, "prompt:admitted")])
    next_ms = int(time.time() * 1000) + 8000
    tracker.upstream_status("ses_A", SessionStatus("retry", attempt=2, message="Rate limited", next_ms=next_ms))
    clock.now += 0.5
    tracker.observe_active(["ses_A"], observed_at=clock.now)  # still active: still retrying
    assert tracker.status("ses_A") is Status.RETRYING and tracker.wants_polling
    clock.now += 0.5
    tracker.committed("ses_A", [ev(2, "step:start")])  # the retry worked
    await wait_until(lambda: len(store.journal) == 3, 5, 0.01, message="three writes")
    assert [w[2] for w in store.journal] == ["running", "retrying", "running"]
    reason = store.journal[1][3]
    assert reason.startswith("attempt 2, next in ") and reason.endswith(": Rate limited")
    assert re.search(r"next in [78] s \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)", reason)


async def test_upstream_idle_wakes_the_poller_but_the_active_list_ends_the_turn(parts: Any) -> None:
    tracker, _store, clock = parts
    await tracker.resume("ses_A", 0)
    tracker.upstream_status("ses_A", SessionStatus("busy"))
    assert tracker.status("ses_A") is Status.RUNNING
    tracker.clear_wake()
    tracker.upstream_status("ses_A", SessionStatus("idle"))
    assert await tracker.wait_for_turn(0.01)  # the poller looks now
    assert tracker.status("ses_A") is Status.RUNNING  # idle may precede the last updates (§16)
    clock.now += 1
    tracker.observe_active([], observed_at=clock.now)
    assert tracker.status("ses_A") is Status.IDLE


async def test_a_new_owner_continues_a_running_turn_and_polls_fast(parts: Any) -> None:
    tracker, store, _clock = parts
    store.put("ses_A", status="running", kinds=["prompt:admitted", "step:start"])
    await tracker.resume("ses_A", 7)
    assert tracker.wants_polling
    assert await tracker.wait_for_turn(0.01)  # the poller is woken at once


async def test_a_parked_session_followed_again_is_stored_idle(parts: Any) -> None:
    tracker, store, _clock = parts
    store.put("ses_A", status="parked", status_reason="follower failed 5 times")
    await tracker.resume("ses_A", 3)
    await wait_until(lambda: store.journal == [("status", "ses_A", "idle", None)], 5, 0.01)


async def test_a_deletion_is_announced_without_a_status_write_of_its_own(parts: Any) -> None:
    tracker, store, _clock = parts
    await tracker.resume("ses_A", 3)
    with capture_logs() as logs:
        tracker.deleted("ses_A")
        await wait_until(lambda: any(e["event"] == "session_status" for e in logs), 5, 0.01)
    assert [e["status"] for e in logs if e["event"] == "session_status"] == ["deleted"]
    assert store.journal == [] and tracker.status("ses_A") is None


async def test_a_poll_visits_the_machines_that_may_move_not_every_quiet_warm_session(
    parts: Any, monkeypatch: Any
) -> None:
    tracker, store, clock = parts
    for i in range(200):
        store.put(f"ses_Q{i:03d}", lease_owner=ME)
        await tracker.resume(f"ses_Q{i:03d}", 0)
    await tracker.resume("ses_A", 0)
    tracker.observe_active([], observed_at=clock.now)  # every machine notes the inactivity: all quiet now
    visited: list[str] = []
    real = TurnTracker.on_active

    def counting(self: TurnTracker, active: bool, observed_at: float, now: float) -> Any:
        visited.append(next(sid for sid, t in tracker._trackers.items() if t is self))
        return real(self, active, observed_at, now)

    monkeypatch.setattr(TurnTracker, "on_active", counting)
    clock.now += 1
    tracker.observe_active([], observed_at=clock.now)
    assert visited == []
    tracker.committed("ses_A", [ev(1, "prompt:admitted"), ev(2, "step:start")])
    clock.now += 1
    tracker.observe_active(["ses_Q007"], observed_at=clock.now)  # a turn of ses_A runs; ses_Q007 is listed
    assert sorted(visited) == ["ses_A", "ses_Q007"]
    assert tracker.status("ses_Q007") is Status.RUNNING and tracker.status("ses_A") is Status.RUNNING
    visited.clear()
    tracker.committed("ses_A", [ev(3, "step:end")])
    for _ in range(2):  # each leaves active: idle, then quiet again
        clock.now += 1
        tracker.observe_active([], observed_at=clock.now)
    assert tracker.status("ses_Q007") is Status.IDLE and tracker.status("ses_A") is Status.IDLE
    visited.clear()
    clock.now += 1
    tracker.observe_active([], observed_at=clock.now)
    assert visited == []
