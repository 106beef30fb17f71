"""Parking (bridge.sessions.parking): a ceiling on one session's failures within a window; failures of the
environment never count."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError

from bridge.sessions.parking import FailureStreak, is_transient


def test_the_limit_within_the_window_parks_and_older_failures_are_forgotten() -> None:
    streak = FailureStreak(limit=3, window_s=10.0)
    assert not streak.failed(0.0)
    assert not streak.failed(1.0)
    assert not streak.failed(10.5)  # the first one is out of the window: two in it
    assert streak.failed(11.0)
    assert streak.count == 3


def test_a_committed_batch_ends_the_streak() -> None:
    streak = FailureStreak(limit=2, window_s=60.0)
    assert not streak.failed(0.0)
    streak.succeeded()
    assert not streak.failed(1.0)
    assert streak.failed(2.0)


def test_the_reason_names_the_count_the_window_and_the_last_error_and_is_bounded() -> None:
    streak = FailureStreak(limit=1, window_s=300.0)
    streak.failed(0.0)
    reason = streak.reason(ValueError("x" * 2000))
    assert reason.startswith("follower failed 1 times within 300 s; last error: ValueError: xxx")
    assert len(reason) == 500


def _dbapi(orig: Exception, *, invalidated: bool = False) -> DBAPIError:
    return DBAPIError("stmt", {}, orig, connection_invalidated=invalidated)


class _Sqlstate(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def test_the_database_or_the_network_being_away_is_transient() -> None:
    assert is_transient(ConnectionRefusedError("refused"))
    assert is_transient(TimeoutError())
    assert is_transient(InterfaceError("stmt", {}, Exception("connection is closed"), connection_invalidated=True))
    assert is_transient(_dbapi(Exception("gone"), invalidated=True))
    assert is_transient(_dbapi(_Sqlstate("57P01")))  # admin shutdown
    assert is_transient(_dbapi(_Sqlstate("57P03")))  # cannot connect now (starting up)
    assert is_transient(_dbapi(_Sqlstate("08006")))  # connection failure
    assert is_transient(_dbapi(_Sqlstate("53300")))  # too many connections


def test_what_the_session_itself_causes_is_not_transient() -> None:
    assert not is_transient(ValueError("seq out of range"))
    assert not is_transient(InterfaceError("stmt", {}, Exception("another operation is in progress")))
    assert not is_transient(_dbapi(_Sqlstate("22021")))  # a character the database cannot hold (NUL)
    assert not is_transient(_dbapi(_Sqlstate("57014")))  # a statement cancelled (timeout): this statement
    assert not is_transient(_dbapi(_Sqlstate("22003")))  # numeric value out of range
