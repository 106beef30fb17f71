"""bridge.sessions.idle_due: the sessions whose last activity is at or before a horizon, found from a heap
instead of a walk; the same answer as the walk of every warm session for any history."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.sessions.idle_due import IdleDue


@dataclass(eq=False)
class Warm:
    """A warm session as the registry holds it: a new object each time the session is warmed."""

    last_activity: float


class Registry:
    def __init__(self) -> None:
        self.warm: dict[str, Warm] = {}
        self.due = IdleDue[Warm]()

    def warm_up(self, sid: str, now: float) -> None:
        w = self.warm[sid] = Warm(now)
        self.due.track(sid, w, now)

    def activity_of(self, sid: str, w: Warm) -> float | None:
        return w.last_activity if self.warm.get(sid) is w else None

    def walk(self, horizon: float) -> set[str]:
        return {sid for sid, w in self.warm.items() if w.last_activity <= horizon}

    def indexed(self, horizon: float) -> list[str]:
        return [sid for sid, _ in self.due.due(horizon, self.activity_of)]


def test_a_session_comes_due_when_its_last_activity_passes_the_horizon() -> None:
    r = Registry()
    r.warm_up("ses_a", 0.0)
    r.warm_up("ses_b", 5.0)
    assert r.indexed(-1.0) == []
    assert r.indexed(0.0) == ["ses_a"]
    assert r.indexed(4.0) == ["ses_a"]  # still idle, still a candidate (the sweep kept it)
    r.warm["ses_a"].last_activity = 10.0  # a stored batch: only a number moves
    assert r.indexed(6.0) == ["ses_b"]
    assert sorted(r.indexed(10.0)) == ["ses_a", "ses_b"]


def test_an_activity_seen_late_pushes_the_session_back() -> None:
    r = Registry()
    r.warm_up("ses_a", 0.0)
    r.warm["ses_a"].last_activity = 8.0
    assert r.indexed(5.0) == []  # popped, found active at 8, pushed again
    assert len(r.due) == 1
    assert r.indexed(8.0) == ["ses_a"]


def test_a_session_gone_or_warmed_again_is_answered_once_under_its_new_token() -> None:
    r = Registry()
    r.warm_up("ses_a", 0.0)
    assert r.indexed(1.0) == ["ses_a"]
    del r.warm["ses_a"]  # released
    assert r.indexed(1.0) == [] and len(r.due) == 0
    r.warm_up("ses_b", 0.0)
    del r.warm["ses_b"]
    r.warm_up("ses_b", 2.0)  # warmed again: the old entry is stale
    assert r.indexed(1.0) == []
    assert r.indexed(2.0) == ["ses_b"]
    assert len(r.due) == 1


ops = st.lists(st.tuples(st.sampled_from(["warm", "active", "release", "sweep"]), st.integers(0, 7),
                         st.floats(0, 3)), max_size=80)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_the_same_sessions_as_the_walk_for_any_history(history: list[tuple[str, int, float]]) -> None:
    """Warm, active (a stored batch or a hint), release and sweep in any order, the clock moving on: every
    sweep finds exactly what a walk of every warm session finds, and each at most once."""
    r = Registry()
    now = 0.0
    for op, n, dt in history:
        now += dt
        sid = f"ses_{n}"
        if op == "warm":
            if sid in r.warm:
                r.warm[sid].last_activity = now  # warming a warm session counts as activity
            else:
                r.warm_up(sid, now)
        elif op == "active" and sid in r.warm:
            r.warm[sid].last_activity = now
        elif op == "release":
            r.warm.pop(sid, None)
        elif op == "sweep":
            horizon = now - 2.0
            found = r.indexed(horizon)
            assert len(found) == len(set(found))
            assert set(found) == r.walk(horizon)
