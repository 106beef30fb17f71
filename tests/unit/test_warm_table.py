"""The one owner of the warm sessions' state (bridge.sessions.warm_table), pure: the epoch kept once and
answered by the keeper's index, the idle candidates, the marks, a session's end; and any sequence of
changes answers the keeper's and the sweep's questions exactly as a walk of the warm sessions would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.events import parse_envelope
from bridge.sessions.parking import FailureStreak
from bridge.sessions.warm_table import WarmTable
from tests.support.memory_upstream import envelope


@contextmanager
def task() -> Iterator[asyncio.Task[None]]:
    loop = asyncio.new_event_loop()
    t = loop.create_task(asyncio.sleep(3600))
    try:
        yield t
    finally:
        t.cancel()
        loop.run_until_complete(asyncio.gather(t, return_exceptions=True))
        loop.close()


def test_a_claim_holds_the_epoch_once_and_a_park_or_the_end_gives_it_up() -> None:
    with task() as t:
        table = WarmTable()
        table.refuse("ses_A", until=50.0)
        w = table.add("ses_A", t, 10.0, "request", FailureStreak())
        assert table.epoch("ses_A") is None and w.claimed_at is None
        table.hold("ses_A", 3, now=12.0)
        assert table.epoch("ses_A") == 3 and w.claimed_at == 12.0 and table.refused_until("ses_A") == 0.0
        assert table.not_renewed({"ses_A": 3}) == [] and table.not_renewed({"ses_A": 4}) == ["ses_A"]
        table.park("ses_A", "crashed")
        assert table.epoch("ses_A") is None and table.parked() == {"ses_A": "crashed"}
        table.hold("ses_A", 4, now=13.0)
        assert table.removed("ses_A", w) and table.get("ses_A") is None and table.epoch("ses_A") is None
        assert table.churn() == (1, 0) and table.footprint()["epochs"] == 0


def test_a_stale_session_ending_leaves_its_successor_alone() -> None:
    with task() as t:
        table = WarmTable()
        old = table.add("ses_A", t, 0.0, "request", FailureStreak())
        new = table.add("ses_A", t, 1.0, "request", FailureStreak())
        table.hold("ses_A", 2, now=1.0)
        assert not table.removed("ses_A", old)
        assert table.get("ses_A") is new and table.epoch("ses_A") == 2 and table.churn() == (1, 1)


def test_stop_records_the_mode_and_cancels_the_task() -> None:
    with task() as t:
        table = WarmTable()
        w = table.add("ses_A", t, 0.0, "request", FailureStreak())
        assert w.stop_mode == "release"
        table.stop(w, "lease_lost")
        assert w.stop_mode == "lease_lost" and t.cancelling()


def test_twins_wait_for_the_follower_and_are_handed_to_it_once() -> None:
    with task() as t:
        table = WarmTable()
        w = table.add("ses_A", t, 0.0, "request", FailureStreak())
        w.twin(parse_envelope(envelope("ses_A", 1)))
        w.seen(2)
        assert table.footprint()["early_twins"] == 1
        handed = []
        follower = table.follow_with(w, lambda early: handed.append(early) or "the follower")  # type: ignore

        assert follower == "the follower" and w.follower == "the follower"
        assert handed[0] is not None and list(handed[0].exact) == [1] and handed[0].announced == {2}
        assert table.footprint()["early_twins"] == 0


def test_activity_moves_only_by_touch_or_commit_and_commit_ends_a_failure_streak() -> None:
    with task() as t:
        table = WarmTable()
        streak = FailureStreak(limit=2, window_s=60.0)
        w = table.add("ses_A", t, 0.0, "request", streak)
        assert not table.touch("ses_B", 5.0)
        assert table.touch("ses_A", 5.0) and w.last_activity == 5.0
        streak.failed(1.0)
        table.committed(w, 7.0)
        assert w.last_activity == 7.0 and streak.count == 0


def test_marks() -> None:
    table = WarmTable()
    table.mark_deleted("ses_D")
    table.set_subscribers("ses_S", 2)
    table.refuse("ses_R", until=10.0)
    table.refuse("ses_Q", until=30.0)
    table.forget_refusals_before(20.0)
    assert table.is_deleted("ses_D") and table.subscribers("ses_S") == 2 and table.subscribed() == ["ses_S"]
    assert table.refused_until("ses_R") == 0.0 and table.refused_until("ses_Q") == 30.0
    table.set_subscribers("ses_S", 0)
    table.park("ses_P", "stuck")
    table.unpark("ses_P")
    assert table.subscribed() == [] and not table.is_parked("ses_P")


SIDS = [f"ses_{c}" for c in "ABCD"]
steps = st.lists(st.tuples(st.sampled_from(["add", "hold", "drop", "touch", "remove", "park"]),
                           st.sampled_from(SIDS), st.integers(0, 5), st.integers(0, 20)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps, st.dictionaries(st.sampled_from(SIDS), st.integers(0, 5)), st.integers(0, 800))
def test_the_indexes_answer_as_a_walk_would(ops: list[tuple[str, str, int, int]], held: dict[str, int],
                                            horizon: int) -> None:
    with task() as t:
        table = WarmTable()
        now = 0.0
        for op, sid, epoch, step in ops:
            now += step  # the clock never goes back
            at = now
            w = table.get(sid)
            if op == "add" and w is None:
                table.add(sid, t, float(at), "request", FailureStreak())
            elif op == "hold" and w is not None:
                table.hold(sid, epoch, float(at))
            elif op == "drop":
                table.hold(sid, None)
            elif op == "touch":
                table.touch(sid, float(at))
            elif op == "remove" and w is not None:
                table.removed(sid, w)
            elif op == "park":
                table.park(sid, "test")
        claimed = {sid: e for sid in table.sessions() if (e := table.epoch(sid)) is not None}
        assert sorted(table.not_renewed(held)) == sorted(s for s, e in claimed.items() if held.get(s) != e)
        assert sorted(table.strays(held)) == sorted(s for s in held if table.get(s) is None)
        idle = {sid for sid, _ in table.idle_owned(float(horizon))}
        walked = {s for s in claimed if (ws := table.get(s)) is not None and ws.last_activity <= horizon}
        assert idle == walked
