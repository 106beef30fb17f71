"""The session status machine (pure, injected clock): running → idle, stalled, interrupted, deleted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bridge.sessions.status_machine import Status, Transition, TurnTracker

STALL = 30.0
SETTLE = 2.0
TURN = ["prompt:admitted", "prompt:started", "step:start", "text:start", "text:end", "step:end"]


def tracker() -> TurnTracker:
    return TurnTracker(stall_timeout_s=STALL, settle_s=SETTLE)


def inactive(t: TurnTracker, at: float) -> Transition | None:
    return t.on_active(False, observed_at=at, now=at + 0.05)


def test_a_normal_turn_goes_running_then_idle_when_the_session_leaves_active() -> None:
    t = tracker()
    assert t.on_events(TURN[:3], now=1.0) == Transition(Status.RUNNING, None)
    assert t.on_events(TURN[3:], now=2.0) is None  # still running: no transition
    assert t.on_active(True, observed_at=2.5, now=2.6) is None
    assert inactive(t, 3.0) == Transition(Status.IDLE, None)
    assert t.status is Status.IDLE and not t.wants_polling


def test_an_observation_that_started_before_our_latest_event_is_ignored() -> None:
    t = tracker()
    t.on_events(TURN, now=10.0)
    # The poll request left at 9.9, before the turn's events were committed: it says nothing about them.
    assert t.on_active(False, observed_at=9.9, now=10.1) is None
    assert t.status is Status.RUNNING
    assert inactive(t, 10.2) == Transition(Status.IDLE, None)


def test_prompted_without_a_step_and_not_active_becomes_stalled_after_stall_timeout() -> None:
    t = tracker()
    t.on_events(["prompt:admitted", "prompt:started"], now=0.0)
    for at in range(1, 30):
        assert inactive(t, float(at)) is None, at
    tr = inactive(t, 30.0)
    assert tr is not None and tr.status is Status.STALLED
    assert tr.reason is not None and "no step started" in tr.reason and "model" in tr.reason


def test_stalled_is_announced_once_however_often_the_session_is_polled_afterwards() -> None:
    t = tracker()
    t.on_events(["prompt:started"], now=0.0)
    inactive(t, 1.0)
    transitions = [inactive(t, float(at)) for at in range(30, 200)]
    assert [tr.status for tr in transitions if tr is not None] == [Status.STALLED]


def test_a_prompt_that_is_active_upstream_never_stalls() -> None:
    t = tracker()
    t.on_events(["prompt:admitted", "prompt:started"], now=0.0)
    for at in range(1, 100):
        assert t.on_active(True, observed_at=float(at), now=at + 0.05) is None
    assert t.status is Status.RUNNING


def test_a_step_starting_late_clears_the_stall_watch() -> None:
    t = tracker()
    t.on_events(["prompt:started"], now=0.0)
    t.on_events(["step:start"], now=25.0)  # provider retries delay step.started (docs/upstream.md §4.3)
    assert inactive(t, 40.0) is None  # an open step: settling
    tr = inactive(t, 42.0)
    assert tr is not None and tr.status is Status.INTERRUPTED  # …and not stalled


def test_an_open_step_is_closed_as_interrupted_once_not_active_held_for_the_settle_time() -> None:
    t = tracker()
    t.on_events(TURN[:4], now=0.0)  # step and text started: then the upstream restarted (§7)
    assert inactive(t, 1.0) is None
    assert inactive(t, 2.0) is None
    tr = inactive(t, 3.0)
    assert tr is not None and tr.status is Status.INTERRUPTED and tr.reason and "upstream restart" in tr.reason
    assert inactive(t, 10.0) is None  # closed once
    assert t.on_events(TURN, now=11.0) == Transition(Status.RUNNING, None)  # the next prompt works normally
    assert inactive(t, 11.5) == Transition(Status.IDLE, None)


def test_a_step_end_arriving_after_a_not_active_poll_ends_idle_never_interrupted() -> None:
    t = tracker()
    t.on_events(TURN[:5], now=0.0)
    assert inactive(t, 5.0) is None  # upstream finished; our durable stream lags behind by a little
    t.on_events(["step:end"], now=5.1)
    assert inactive(t, 5.2) == Transition(Status.IDLE, None)


def test_events_that_are_not_part_of_a_turn_do_not_change_the_status() -> None:
    t = tracker()
    assert t.on_events(["agent:switch", "model:switch", "unknown"], now=1.0) is None
    assert t.status is Status.IDLE


def test_an_idle_session_listed_active_is_running() -> None:
    t = tracker()
    assert t.on_active(True, observed_at=1.0, now=1.1) == Transition(Status.RUNNING, None)
    assert t.wants_polling
    assert inactive(t, 2.0) == Transition(Status.IDLE, None)


def test_a_stalled_session_runs_again_on_the_next_prompt() -> None:
    t = tracker()
    t.on_events(["prompt:started"], now=0.0)
    inactive(t, 1.0)
    assert inactive(t, 31.0) is not None and t.status is Status.STALLED
    assert t.on_events(["prompt:admitted"], now=40.0) == Transition(Status.RUNNING, None)


def test_deleted_is_terminal() -> None:
    t = tracker()
    t.on_events(TURN[:3], now=0.0)
    assert t.on_deleted() == Transition(Status.DELETED, "deleted upstream")
    assert t.on_events(TURN, now=1.0) is None
    assert t.on_active(True, observed_at=2.0, now=2.1) is None
    assert t.status is Status.DELETED


def test_a_resumed_tracker_continues_a_turn_the_previous_owner_saw_start() -> None:
    t = tracker()
    t.on_events(["prompt:started", "step:start", "text:start"], now=0.0)  # the stored tail
    inactive(t, 0.5)
    tr = inactive(t, 2.5)
    assert tr is not None and tr.status is Status.INTERRUPTED


KINDS = st.sampled_from([*TURN, "step:fail", "tool:start", "tool:success", "agent:switch"])
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("events"), st.lists(KINDS, min_size=1, max_size=4)),
        st.tuples(st.just("active"), st.booleans()),
        st.tuples(st.just("advance"), st.floats(0.0, 20.0)),
        st.tuples(st.just("delete"), st.none()),
    ),
    max_size=40,
)


@given(STEPS)
def test_any_history_keeps_the_machine_consistent(steps: list[tuple[str, object]]) -> None:
    t = tracker()
    now = 0.0
    deleted = False
    for what, arg in steps:
        before = (t.status, t.step_open, t.prompted_at is not None)
        tr: Transition | None = None
        if what == "events":
            assert isinstance(arg, list)
            tr = t.on_events(arg, now)
        elif what == "active":
            tr = t.on_active(bool(arg), now, now)
            if tr is not None and tr.status is Status.INTERRUPTED:
                assert before[1], "interrupted only closes an open step"
            if tr is not None and tr.status is Status.STALLED:
                assert before[2] and not arg, "stalled only for a waiting prompt that is not active"
            if arg and not deleted:
                assert t.status is Status.RUNNING
        elif what == "advance":
            assert isinstance(arg, float)
            now += arg
        else:
            t.on_deleted()
            deleted = True
        if tr is not None:
            assert tr.status is not before[0], "a transition always changes the status"
        if deleted:
            assert t.status is Status.DELETED
        if t.status is not Status.RUNNING:
            assert not t.wants_polling


@given(STEPS, st.floats(0.0, 100.0))
def test_a_quiet_machine_is_left_exactly_as_it_was_by_any_later_not_active_observation(
    steps: list[tuple[str, object]], later: float
) -> None:
    """What lets a poll skip quiet machines (bridge.sessions.activity): for them "not active" is a no-op."""
    t = tracker()
    now = 0.0
    for what, arg in steps:
        if what == "events":
            assert isinstance(arg, list)
            t.on_events(arg, now)
        elif what == "active":
            t.on_active(bool(arg), now, now)
        elif what == "advance":
            assert isinstance(arg, float)
            now += arg
        else:
            t.on_deleted()
    if not t.quiet:
        return
    before = dict(vars(t))
    assert inactive(t, now + later) is None
    assert vars(t) == before


def test_a_machine_is_quiet_once_its_turn_ended_and_not_while_a_prompt_or_step_is_open() -> None:
    t = tracker()
    assert not t.quiet  # inactivity not noted yet
    inactive(t, 0.0)
    assert t.quiet
    t.on_events(["prompt:admitted"], now=1.0)
    assert not t.quiet
    inactive(t, 1.5)
    assert not t.quiet  # the stall clock runs
    t.on_events(["step:start"], now=2.0)
    inactive(t, 2.5)
    assert not t.quiet  # a step is open
    t.on_events(["step:end"], now=3.0)
    tr = inactive(t, 3.5)
    assert tr is not None and tr.status is Status.IDLE and t.quiet
