"""bridge.upstream.stall_policy: a late stream is reconnected when it waited `stall_s` longer than the streams
that deliver, within a budget; one stuck stream in a quiet process after `stall_s`, as before."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.upstream.stall_policy import BURST, MAX_WAIT_FACTOR, RATE_PER_S, StallGovernor, StallVerdict


def test_a_quiet_process_reconnects_a_stream_at_stall_s() -> None:
    g = StallGovernor(10.0)
    assert g.bound(100.0) == 10.0
    assert g.overdue(10.0, 100.0) == StallVerdict(True, 100.0)


def test_a_stream_within_the_backlog_is_held_until_it_passes_it() -> None:
    g = StallGovernor(10.0)
    g.delivered(25.0, now=100.0)  # the process serves streams 25 s after their announcement
    v = g.overdue(12.0, 101.0)
    assert v == StallVerdict(False, 101.0 + (35.0 - 12.0), None, "backlog")
    assert g.overdue(35.0, 101.0).reconnect  # 10 s later than the latest delivery: stuck


def test_the_backlog_is_the_largest_wait_of_the_last_stall_s() -> None:
    g = StallGovernor(10.0)
    g.delivered(30.0, now=0.0)
    g.delivered(5.0, now=4.0)
    g.delivered(12.0, now=8.0)
    assert g.backlog(9.0) == 30.0
    assert g.backlog(10.0) == 30.0  # the window is closed at its start
    assert g.backlog(10.5) == 12.0  # the 30 s wait left the window; the 5 s one never counts again
    assert g.backlog(18.5) == 0.0
    assert g.bound(18.5) == 10.0


def test_while_a_crowd_waits_a_pause_in_deliveries_is_the_process_s() -> None:
    g = StallGovernor(1.0, crowd=3)
    for _ in range(3):
        g.opened(0.0)
    g.delivered(0.5, now=1.0)
    assert g.pause(2.5) == 1.5 and g.backlog(2.5) == 0.0  # nothing delivered for 1.5 s, the window is empty
    assert g.bound(2.5) == 2.5
    assert g.overdue(2.4, 2.5) == StallVerdict(False, pytest.approx(2.6), None, "backlog")
    # stuck: it had waited stall_s + backlog already at the last delivery (it began waiting before 0.0)
    assert g.overdue(2.6, 2.5).reconnect
    g.closed()
    assert g.open_waits == 2 and g.pause(2.5) == 0.0 and g.bound(2.5) == 1.0  # no crowd: its own clock


def test_the_pause_counts_from_the_crowd_at_most() -> None:
    g = StallGovernor(1.0, crowd=2)
    g.delivered(0.1, now=0.0)
    g.opened(100.0)
    assert g.pause(101.0) == 0.0
    g.opened(100.5)  # a crowd from now on; the last delivery is long past
    assert g.pause(101.0) == 0.5
    g.closed()
    g.closed()
    g.closed()  # never below zero
    assert g.open_waits == 0
    g.opened(200.0)
    g.opened(200.0)
    assert g.pause(201.0) == 1.0


def test_the_lateness_is_backlog_plus_pause() -> None:
    g = StallGovernor(2.0, crowd=1)
    g.opened(0.0)
    g.delivered(3.0, now=1.0)
    assert g.lateness(1.5) == 3.0 + 0.5


def test_the_bound_is_capped() -> None:
    g = StallGovernor(10.0)
    g.delivered(1_000.0, now=0.0)
    assert g.bound(0.0) == 10.0 * MAX_WAIT_FACTOR
    assert g.overdue(10.0 * MAX_WAIT_FACTOR, 0.0).reconnect
    assert StallGovernor(10.0, max_wait_s=30.0).bound(0.0) == 10.0
    assert StallGovernor(10.0, max_wait_s=5.0).max_wait_s == 10.0  # never below stall_s


def test_a_burst_of_stuck_streams_is_granted_then_trickles_with_reserved_slots() -> None:
    g = StallGovernor(1.0, rate_per_s=10.0, burst=3)
    now = 50.0
    granted = [g.overdue(1.0, now).reconnect for _ in range(3)]
    assert granted == [True, True, True]
    v = g.overdue(1.0, now)
    assert (v.reconnect, v.why) == (False, "budget") and v.ticket == v.at and v.at == pytest.approx(now + 0.1)
    assert g.overdue(1.0, now, v.ticket) == StallVerdict(False, v.ticket, v.ticket, "budget")  # too early
    assert g.overdue(1.1, v.at, v.ticket).reconnect  # its slot: granted
    tickets = [g.overdue(1.0, now).ticket for _ in range(2)]
    assert tickets == [pytest.approx(now + 0.2), pytest.approx(now + 0.3)]


def test_beyond_the_horizon_a_stream_asks_again_without_a_slot() -> None:
    g = StallGovernor(1.0, rate_per_s=10.0, burst=2)
    verdicts = [g.overdue(1.0, 0.0) for _ in range(6)]
    assert [v.reconnect for v in verdicts] == [True, True, False, False, False, False]
    assert [v.ticket for v in verdicts[2:4]] == [pytest.approx(0.1), pytest.approx(0.2)]
    assert verdicts[4] == StallVerdict(False, pytest.approx(0.2), None, "budget")
    assert verdicts[5].ticket is None
    later = g.overdue(1.0, 0.2)  # the reserved slots were due by then: a new slot right after them
    assert later.ticket == pytest.approx(0.3)


def test_a_ticket_lapses_when_the_stream_falls_within_the_bound() -> None:
    g = StallGovernor(1.0, rate_per_s=1.0, burst=1)
    assert g.overdue(1.0, 0.0).reconnect
    v = g.overdue(1.0, 0.0)
    assert v.ticket == 1.0
    g.delivered(5.0, now=0.5)  # streams are served 5 s late now
    assert g.overdue(1.5, 1.0, v.ticket) == StallVerdict(False, 1.0 + 4.5, None, "backlog")


def test_the_budget_refills_at_its_rate() -> None:
    g = StallGovernor(1.0, rate_per_s=2.0, burst=2)
    assert g.overdue(1.0, 0.0).reconnect and g.overdue(1.0, 0.0).reconnect
    assert not g.overdue(1.0, 0.0).reconnect  # reserves 0.5
    assert not g.overdue(1.0, 0.4).reconnect  # reserves 1.0
    assert g.overdue(1.0, 10.0).reconnect and g.overdue(1.0, 10.0).reconnect  # full again after a while


def test_defaults_and_refused_settings() -> None:
    g = StallGovernor(10.0)
    assert [g.overdue(10.0, 0.0).reconnect for _ in range(BURST)] == [True] * BURST
    v = g.overdue(10.0, 0.0)
    assert not v.reconnect and v.at == pytest.approx(1.0 / RATE_PER_S)
    for bad in ({"stall_s": 0.0}, {"stall_s": 1.0, "rate_per_s": 0.0}, {"stall_s": 1.0, "burst": 0}):
        with pytest.raises(ValueError):
            StallGovernor(**bad)  # type: ignore[arg-type]


deliveries = st.lists(st.tuples(st.floats(0, 5), st.floats(0, 200)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(deliveries, st.floats(0, 5))
def test_backlog_is_the_window_maximum(steps: list[tuple[float, float]], probe_after: float) -> None:
    """Against the definition: the largest wait delivered within the last stall_s, whatever the order."""
    g = StallGovernor(3.0)
    now, seen = 0.0, []
    for dt, wait in steps:
        now += dt
        g.delivered(wait, now)
        seen.append((now, wait))
    now += probe_after
    expected = max((w for t, w in seen if t >= now - 3.0), default=0.0)
    assert g.backlog(now) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 0.5), min_size=1, max_size=200), st.floats(0.5, 50), st.integers(1, 20))
def test_grants_never_outrun_the_budget(gaps: list[float], rate: float, burst: int) -> None:
    """Streams beyond the bound arrive (`gaps` apart) and each asks again exactly at its `at`: over any span,
    grants stay within burst + rate x span, every stream is granted in the end, and none is told to ask
    again in the past."""
    g = StallGovernor(1.0, rate_per_s=rate, burst=burst)
    asks: list[tuple[float, int, float | None]] = []  # (when, stream, ticket): a heap
    now = 0.0
    for i, gap in enumerate(gaps):
        now += gap
        heapq.heappush(asks, (now, i, None))
    grants: list[float] = []
    while asks:
        at, stream, ticket = heapq.heappop(asks)
        v = g.overdue(1.0, at, ticket)
        if v.reconnect:
            grants.append(at)
        else:
            assert v.at > at and v.why == "budget"
            heapq.heappush(asks, (v.at, stream, v.ticket))
    assert len(grants) == len(gaps)
    for i, start in enumerate(grants):
        for j in range(i, len(grants)):
            assert j - i + 1 <= burst + rate * (grants[j] - start) + 1e-6


@settings(max_examples=300, deadline=None)
@given(deliveries, st.floats(0, 300), st.floats(0, 10))
def test_a_stream_within_the_bound_is_never_reconnected_and_beyond_it_never_for_backlog(
        steps: list[tuple[float, float]], waited: float, later: float) -> None:
    g = StallGovernor(3.0)
    now = 0.0
    for dt, wait in steps:
        now += dt
        g.delivered(wait, now)
    now += later
    bound = g.bound(now)
    v = g.overdue(max(waited, 3.0), now)
    if max(waited, 3.0) < bound:
        assert not v.reconnect and v.why == "backlog" and v.at == pytest.approx(now + bound - max(waited, 3.0))
    else:
        assert v.reconnect  # a fresh governor's budget is full
    assert 3.0 <= bound <= 3.0 * MAX_WAIT_FACTOR
