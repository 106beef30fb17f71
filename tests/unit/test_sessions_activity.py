"""ActivityTracker: committed batches and /api/session/active observations → status machine → status and
gap writes, in the order of their causes; only the holder's writes count. The store is an in-memory twin
of the lease store's lifecycle statements; the clock is a variable."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest_asyncio
from structlog.testing import capture_logs

from bridge.sessions.activity import TURN_SETTLE_S, ActivityTracker
from bridge.store.leases import TurnState
from tests.support.waiting import wait_until

ME = "host:1:me"


class MemoryLifecycle:
    """What bridge.store.leases.LeaseStore stores for the tracker, in memory; `holder` holds every lease."""

    def __init__(self) -> None:
        self.holder = ME
        self.stored: dict[str, tuple[str, str | None, list[str]]] = {}
        self.writes: list[tuple[Any, ...]] = []

    async def turn_state(self, session_id: str) -> TurnState:
        status, reason, tail = self.stored.get(session_id, ("idle", None, []))
        return TurnState(status, reason, tail)

    async def set_status(self, session_id: str, owner: str, status: str, reason: str | None) -> bool:
        if owner != self.holder:
            return False
        self.writes.append(("status", session_id, status, reason))
        return True

    async def record_gap(self, session_id: str, from_seq: int, to_seq: int) -> None:
        self.writes.append(("gap", session_id, from_seq, to_seq))

    async def legacy_seq_seen(self, session_id: str, seq: int) -> None:
        self.writes.append(("legacy", session_id, seq))


def ev(seq: int, kind: str) -> Any:
    return SimpleNamespace(seq=seq, kind=kind)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def parts() -> AsyncIterator[tuple[ActivityTracker, MemoryLifecycle, Clock]]:
    store, clock = MemoryLifecycle(), Clock()
    tracker = ActivityTracker(store, ME, stall_timeout_s=30.0, clock=clock)
    task = asyncio.create_task(tracker.run())
    yield tracker, store, clock
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_gaps_and_statuses_are_written_in_the_order_of_their_causes(parts: Any) -> None:
    tracker, store, clock = parts
    await tracker.resume("ses_A", 0)
    tracker.committed("ses_A", [ev(1, "prompt:admitted"), ev(5, "step:start")])  # seqs 2-4 burned by legacy
    tracker.legacy_seq("ses_A", 9)
    tracker.legacy_seq("ses_A", 10)  # marked once
    clock.now += 1
    tracker.observe_active([], observed_at=clock.now)
    clock.now += TURN_SETTLE_S + 0.5
    tracker.observe_active([], observed_at=clock.now)  # the step stayed open: the turn was cut
    await wait_until(lambda: len(store.writes) == 4, 5, 0.01, message="four writes")
    assert [w[0] for w in store.writes] == ["gap", "status", "legacy", "status"]
    assert store.writes[0] == ("gap", "ses_A", 2, 4)
    assert store.writes[1] == ("status", "ses_A", "running", None)
    assert store.writes[3][2] == "interrupted"
    assert tracker.status("ses_A") is not None and not tracker.wants_polling


async def test_a_status_of_a_session_we_no_longer_hold_is_neither_stored_nor_announced(parts: Any) -> None:
    tracker, store, _clock = parts
    store.holder = "host:2:peer"
    await tracker.resume("ses_A", 0)
    with capture_logs() as logs:
        tracker.committed("ses_A", [ev(1, "prompt:admitted"), ev(2, "gap:marker"), ev(4, "step:start")])
        tracker.legacy_seq("ses_A", 9)  # queued after the status: once it is written, the status was tried
        await wait_until(lambda: len(store.writes) == 2, 5, 0.01)
    assert store.writes == [("gap", "ses_A", 3, 3), ("legacy", "ses_A", 9)]
    assert not [e for e in logs if e["event"] == "session_status"]


async def test_a_new_owner_continues_a_running_turn_and_polls_fast(parts: Any) -> None:
    tracker, store, _clock = parts
    store.stored["ses_A"] = ("running", None, ["prompt:admitted", "step:start"])
    await tracker.resume("ses_A", 7)
    assert tracker.wants_polling
    assert await tracker.wait_for_turn(0.01)  # the poller is woken at once


async def test_a_parked_session_followed_again_is_stored_idle(parts: Any) -> None:
    tracker, store, _clock = parts
    store.stored["ses_A"] = ("parked", "follower failed 5 times", [])
    await tracker.resume("ses_A", 3)
    await wait_until(lambda: store.writes == [("status", "ses_A", "idle", None)], 5, 0.01)


async def test_a_deletion_is_announced_without_a_status_write_of_its_own(parts: Any) -> None:
    tracker, store, _clock = parts
    await tracker.resume("ses_A", 3)
    with capture_logs() as logs:
        tracker.deleted("ses_A")
        await wait_until(lambda: any(e["event"] == "session_status" for e in logs), 5, 0.01)
    assert [e["status"] for e in logs if e["event"] == "session_status"] == ["deleted"]
    assert store.writes == [] and tracker.status("ses_A") is None
