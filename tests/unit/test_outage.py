"""OutageLog: a dependency that is down is logged on the change of state, not at every retry."""

from __future__ import annotations

import structlog
from structlog.testing import capture_logs

from bridge.outage import OutageLog
from tests.support.serve_model import Clock


def _outage(clock: Clock, remind_every_s: float = 60.0) -> OutageLog:
    return OutageLog(structlog.get_logger("test").bind(upstream="u"), "upstream_live",
                     remind_every_s=remind_every_s, clock=clock)


def test_a_run_of_failed_retries_logs_one_lost_a_reminder_per_interval_and_one_back() -> None:
    clock = Clock(1000.0)
    with capture_logs() as logs:
        out = _outage(clock)
        for _ in range(150):  # 150 retries 1 s apart: lost at 0 s, reminders at 60 s and 120 s
            out.failed("connection refused")
            clock.now += 1.0
        out.succeeded()
    events = [(e["event"], e.get("retries")) for e in logs]
    assert events == [("dependency_lost", None), ("dependency_still_lost", 61), ("dependency_still_lost", 121),
                      ("dependency_back", 150)]
    assert all(e["dependency"] == "upstream_live" and e["upstream"] == "u" for e in logs)
    assert logs[0]["log_level"] == "warning" and logs[-1]["log_level"] == "info"
    assert logs[1]["down_s"] == 60.0 and logs[-1]["down_s"] == 150.0
    assert logs[1]["error"] == "connection refused"


def test_success_while_up_logs_nothing() -> None:
    with capture_logs() as logs:
        out = _outage(Clock(1000.0))
        for _ in range(10):
            out.succeeded()
    assert logs == [] and not out.lost and out.status() == {}


def test_each_outage_is_logged_on_its_own_and_the_count_restarts() -> None:
    clock = Clock(1000.0)
    with capture_logs() as logs:
        out = _outage(clock)
        out.failed("a")
        out.failed("a")
        out.succeeded()
        clock.now += 5
        out.failed("b")
        out.succeeded()
    assert [(e["event"], e.get("retries"), e.get("error")) for e in logs] == [
        ("dependency_lost", None, "a"), ("dependency_back", 2, None),
        ("dependency_lost", None, "b"), ("dependency_back", 1, None)]


def test_a_reminder_waits_for_the_full_interval_since_the_last_one() -> None:
    clock = Clock(1000.0)
    with capture_logs() as logs:
        out = _outage(clock, remind_every_s=10.0)
        out.failed("x")
        clock.now += 9.9
        out.failed("x")  # not yet
        clock.now += 0.1
        out.failed("x")  # 10 s since lost: reminder
        clock.now += 9.0
        out.failed("x")  # 9 s since the reminder: quiet
        clock.now += 1.0
        out.failed("x")
    assert [e["event"] for e in logs] == ["dependency_lost", "dependency_still_lost", "dependency_still_lost"]
    assert [e.get("retries") for e in logs] == [None, 3, 5]


def test_status_says_why_since_when_and_how_many_retries_while_lost() -> None:
    clock = Clock(1000.0)
    with capture_logs():
        out = _outage(clock)
        out.failed("first")
        clock.now += 12.34
        out.failed("503 Service Unavailable")
        assert out.lost
        assert out.status() == {"error": "503 Service Unavailable", "retries": 2, "down_s": 12.3}
        out.succeeded()
    assert out.status() == {} and out.retries == 0 and not out.lost
