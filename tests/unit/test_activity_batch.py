"""bridge.sessions.activity_batch: a batch of queued writes as few statements, a session's statuses in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bridge.sessions.activity_batch import Gap, Title, Write, plan_writes
from bridge.sessions.status_machine import Status, Transition


def test_many_sessions_one_status_each_are_one_round_and_titles_keep_the_last() -> None:
    batch: list[tuple[str, Write]] = [(f"ses_{i}", Transition(Status.IDLE, None)) for i in range(500)]
    batch += [("ses_1", Title("a")), ("ses_2", Title("b")), ("ses_1", Title("c"))]
    plan = plan_writes(batch)
    assert len(plan.status_rounds) == 1 and len(plan.status_rounds[0]) == 500
    assert plan.titles == [("ses_1", "c"), ("ses_2", "b")]
    assert plan.gaps == []


def test_a_session_s_transitions_go_into_successive_rounds_in_order() -> None:
    plan = plan_writes([("A", Transition(Status.RUNNING, None)), ("B", Transition(Status.RUNNING, None)),
                        ("A", Transition(Status.RETRYING, "attempt 1")), ("A", Transition(Status.IDLE, None))])
    assert plan.status_rounds == [[("A", "running", None), ("B", "running", None)],
                                  [("A", "retrying", "attempt 1")], [("A", "idle", None)]]
    assert [(sid, tr.status, k) for sid, tr, k in plan.transitions] == [
        ("A", Status.RUNNING, 0), ("B", Status.RUNNING, 0), ("A", Status.RETRYING, 1), ("A", Status.IDLE, 2)]


def test_deleted_is_reported_not_written_and_gaps_keep_their_order() -> None:
    plan = plan_writes([("A", Gap(2, 4)), ("A", Transition(Status.DELETED, "deleted upstream")), ("B", Gap(1, 1))])
    assert plan.status_rounds == []
    assert plan.transitions[0][2] is None
    assert plan.gaps == [("A", Gap(2, 4)), ("B", Gap(1, 1))]


statuses = st.sampled_from([Status.RUNNING, Status.IDLE, Status.RETRYING, Status.STALLED])


@given(st.lists(st.tuples(st.sampled_from("ABCD"), statuses), max_size=40))
def test_rounds_replay_every_session_s_statuses_in_order_each_session_once_per_round(
        items: list[tuple[str, Status]]) -> None:
    plan = plan_writes([(sid, Transition(s, None)) for sid, s in items])
    for r in plan.status_rounds:
        assert len({sid for sid, _, _ in r}) == len(r)
    for sid in "ABCD":
        replayed = [status for r in plan.status_rounds for s, status, _ in r if s == sid]
        assert replayed == [s.value for x, s in items if x == sid]
