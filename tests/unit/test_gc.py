"""Idle GC policy: release only what nothing needs (pure, injected clock)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from bridge.sessions.gc import WarmFacts, release_reason
from bridge.sessions.status_machine import Status

TTL = 600.0


def facts(idle: float, status: Status = Status.IDLE, active: bool = False, subscribers: int = 0) -> WarmFacts:
    return WarmFacts(now=1000.0 + idle, last_activity_at=1000.0, status=status, active_upstream=active,
                     subscribers=subscribers)


def test_an_idle_session_is_released_once_idle_ttl_has_passed() -> None:
    assert release_reason(facts(599.9), TTL) is None
    reason = release_reason(facts(600.0), TTL)
    assert reason is not None and "idle 600 s" in reason


def test_a_session_with_subscribers_is_never_released() -> None:
    assert release_reason(facts(10_000, subscribers=1), TTL) is None


def test_a_running_or_active_session_is_never_released_mid_turn() -> None:
    assert release_reason(facts(10_000, status=Status.RUNNING), TTL) is None
    assert release_reason(facts(10_000, status=Status.RETRYING), TTL) is None  # upstream retries the provider
    assert release_reason(facts(10_000, active=True), TTL) is None


def test_stalled_interrupted_and_idle_sessions_are_released_after_the_ttl() -> None:
    for status in (Status.IDLE, Status.STALLED, Status.INTERRUPTED):
        assert release_reason(facts(TTL, status=status), TTL) is not None


def test_release_iff_idle_long_enough_and_nothing_needs_it() -> None:
    for idle, status, active, subs in itertools.product(
        (0.0, TTL - 1, TTL, TTL * 10), list(Status), (False, True), (0, 1, 5)
    ):
        released = release_reason(facts(idle, status, active, subs), TTL) is not None
        mid_turn = status in (Status.RUNNING, Status.RETRYING)
        expected = idle >= TTL and not mid_turn and not active and subs == 0
        assert released == expected, (idle, status, active, subs)


def test_a_follower_behind_a_hole_is_never_released() -> None:
    idle_long = facts(idle=10_000)
    assert release_reason(idle_long, 600) is not None
    assert release_reason(replace(idle_long, behind=True), 600) is None
