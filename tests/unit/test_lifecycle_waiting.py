"""The status `waiting` (bridge.sessions.status_machine): a session whose agent waits for a person is neither
`stalled`, `interrupted` nor `idle`, whatever `/api/session/active` says (a legacy turn is never listed
there, docs/upstream.md §18), and is `running` again once answered."""

from __future__ import annotations

from datetime import UTC, datetime

from bridge.events.pending import stored_waiting, waiting_detail, waiting_reason
from bridge.sessions.status_machine import Status, TurnTracker

SINCE = datetime(2026, 12, 1, 21, 10, 22, tzinfo=UTC)


def test_a_legacy_turn_waiting_on_a_question_is_not_cut_and_runs_on_when_answered() -> None:
    t = TurnTracker(stall_timeout_s=30, settle_s=2)
    t.on_events(["prompt:admitted", "step:start", "tool:input-start"], now=1)
    tr = t.on_waiting(("question", SINCE), now=2)
    assert tr is not None and (tr.status, tr.reason) == (Status.WAITING, "question since 2026-12-01T21:10:22Z")
    for n in range(3, 60):  # never listed active: the old machine said `interrupted` after 2 s
        assert t.on_active(False, observed_at=n, now=n) is None
    assert t.on_events(["tool:start"], now=61) is None  # events of the waiting tool keep it waiting
    assert t.on_upstream_status("busy", None, now=61) is None
    assert t.status is Status.WAITING and not t.wants_polling
    tr = t.on_waiting(None, now=62)
    assert tr is not None and tr.status is Status.RUNNING
    assert t.on_active(False, observed_at=61.5, now=62) is None  # older than the answer: says nothing
    t.on_events(["tool:success", "step:end"], now=63)
    t.on_active(False, observed_at=64, now=64)
    t.on_active(False, observed_at=66, now=66)
    assert t.status is Status.IDLE


def test_a_prompt_waiting_on_a_permission_is_never_stalled() -> None:
    t = TurnTracker(stall_timeout_s=5, settle_s=1)
    t.on_events(["prompt:admitted"], now=0)
    t.on_waiting(("permission", SINCE), now=0.5)
    assert all(t.on_active(False, observed_at=n, now=n) is None for n in range(1, 100))
    assert t.status is Status.WAITING


def test_the_oldest_pending_request_gives_the_reason_and_nothing_changes_without_a_wait() -> None:
    t = TurnTracker(stall_timeout_s=5)
    assert t.on_waiting(None, now=0) is None  # nothing was pending
    t.on_waiting(("permission", SINCE), now=1)
    tr = t.on_waiting(("question", SINCE), now=2)
    assert tr is not None and tr.reason == "question since 2026-12-01T21:10:22Z"


def test_a_deleted_session_does_not_wait() -> None:
    t = TurnTracker(stall_timeout_s=5)
    t.on_deleted()
    assert t.on_waiting(("question", SINCE), now=1) is None


def test_the_waiting_reason_reads_back() -> None:
    reason = waiting_reason("question", SINCE)
    assert waiting_detail(reason) == {"for": "question", "since": "2026-12-01T21:10:22Z"}
    assert stored_waiting(reason) == ("question", SINCE)
    assert waiting_detail("turn cut: since forever") is None and stored_waiting("question since x") is None


def test_a_rejected_question_ends_the_turn_idle_although_its_step_never_ended() -> None:
    t = TurnTracker(stall_timeout_s=30, settle_s=2)
    t.on_events(["prompt:admitted", "step:start", "tool:start"], now=1)
    t.on_waiting(("question", SINCE), now=2)
    t.on_waiting(None, now=3, declined=True)
    t.on_events(["tool:fail"], now=3.1)  # "Tool execution interrupted", and no step:end
    tr = t.on_active(False, observed_at=4, now=4)
    assert tr is not None and tr.status is Status.IDLE  # nothing open: no settle time, no `interrupted`
