"""The one owner of the warm sessions' state (docs/lifecycle.md): which sessions are warm, the lease epoch
each holds (kept here once), when it was claimed, its last activity, its follower, how it is to stop, and
the marks of sessions that are not (or not only) warm: deleted, parked, refused by a peer for a while,
subscribed.

`WarmRegistry` (bridge.sessions.registry) starts and stops the sessions, `SessionRunner`
(bridge.sessions.session_run) claims and follows them; both change the state through the methods below,
and neither writes the other's fields. The keeper and the sweep ask their questions here through the
registry, without a Python walk of every warm session (bridge.sessions.lease_index, bridge.sessions.idle_due).
No I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Literal

from bridge.events import Envelope
from bridge.sessions.idle_due import IdleDue
from bridge.sessions.lease_index import not_renewed, strays
from bridge.sessions.parking import FailureStreak
from bridge.upstream.durable import DurableFollower
from bridge.upstream.early_twins import EarlyTwins
from bridge.upstream.port_follower import PortFollower

StopMode = Literal["release", "handoff", "lease_lost"]
Follower = DurableFollower | PortFollower
FollowerMaker = Callable[[EarlyTwins | None], Follower]  # given the twins kept while the session was claimed


class WarmSession:
    """One warm session, read by anyone; changed only by its `WarmTable`."""

    __slots__ = ("_claimed_at", "_early", "_follower", "_last_activity", "_stop_mode", "failures", "reason", "task")

    def __init__(self, task: asyncio.Task[None], now: float, reason: str, failures: FailureStreak) -> None:
        self.task = task
        self.reason = reason  # what warmed it
        self.failures = failures
        self._last_activity = now
        self._claimed_at: float | None = None
        self._stop_mode: StopMode = "release"
        self._follower: Follower | None = None
        # Twins of /global/event that arrive before the follower exists, handed to the first one
        # (bridge.upstream.early_twins); None once handed over.
        self._early: EarlyTwins | None = EarlyTwins()

    @property
    def last_activity(self) -> float:
        return self._last_activity

    @property
    def claimed_at(self) -> float | None:
        return self._claimed_at

    @property
    def stop_mode(self) -> StopMode:
        return self._stop_mode

    @property
    def follower(self) -> Follower | None:
        return self._follower

    @property
    def behind(self) -> bool:
        """Its follower holds events above a hole or has a repair to run (bridge.sessions.gc)."""
        return self._follower is not None and self._follower.behind

    # -- hints from /global/event: to the follower, or kept for it while the session is being claimed ----
    def seen(self, seq: int) -> None:
        if self._follower is not None:
            self._follower.notify_seen(seq)
        elif self._early is not None:
            self._early.seen(seq)

    def twin(self, env: Envelope) -> None:
        if self._follower is not None:
            self._follower.offer_twin(env)
        elif self._early is not None:
            self._early.twin(env)

    def live_lost(self, cause: str) -> None:
        """The live stream reconnected: the follower reads its sync log; one still being claimed reads it
        when it starts (what it kept no longer covers)."""
        if self._follower is not None:
            self._follower.request_repair(cause)
        elif self._early is not None:
            self._early.lost()


class WarmTable:
    def __init__(self) -> None:
        self._warm: dict[str, WarmSession] = {}
        self._epochs: dict[str, int] = {}  # the lease epoch each claimed warm session holds: kept only here
        self._idle = IdleDue[WarmSession]()  # the sweep's idle candidates, by last activity (no walk)
        self._stopped = 0  # followers stopped since start (bridge.perf.runtime.refreeze under churn)
        self._deleted: set[str] = set()
        self._parked: dict[str, str] = {}  # session -> reason
        self._refused: dict[str, float] = {}  # session -> clock() until which a peer holds it
        self._subscribers: dict[str, int] = {}

    # -- questions --------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._warm)

    def claimed(self) -> int:
        """Warm sessions whose lease we hold (`bridge_sessions_warm`): not those still claiming or refused,
        which with workers every worker warms at once (docs/operations.md "Workers")."""
        return len(self._epochs)

    def sessions(self) -> list[str]:
        return sorted(self._warm)

    def get(self, session_id: str) -> WarmSession | None:
        return self._warm.get(session_id)

    def epoch(self, session_id: str) -> int | None:
        """The lease epoch we hold for a warm session (None: not claimed)."""
        return self._epochs.get(session_id)

    def not_renewed(self, held: Mapping[str, int]) -> list[str]:
        """Claimed sessions whose epoch the heartbeat did not renew (bridge.sessions.lease_index)."""
        return not_renewed(self._epochs, held)

    def strays(self, held: Mapping[str, int]) -> list[str]:
        """Held leases with no warm session (bridge.sessions.lease_index)."""
        return list(strays(self._warm, held))

    def idle_owned(self, horizon: float) -> list[tuple[str, WarmSession]]:
        """Claimed sessions whose last activity is at or before `horizon` (bridge.sessions.idle_due)."""
        return [(sid, w) for sid, w in self._idle.due(horizon, self._activity_of) if sid in self._epochs]

    def _activity_of(self, session_id: str, w: WarmSession) -> float | None:
        return w.last_activity if self._warm.get(session_id) is w else None

    def subscribers(self, session_id: str) -> int:
        return self._subscribers.get(session_id, 0)

    def subscribed(self) -> list[str]:
        return list(self._subscribers)

    def is_deleted(self, session_id: str) -> bool:
        return session_id in self._deleted

    def parked(self) -> dict[str, str]:
        return dict(self._parked)

    def is_parked(self, session_id: str) -> bool:
        return session_id in self._parked

    def refused_until(self, session_id: str) -> float:
        return self._refused.get(session_id, 0.0)

    def footprint(self) -> dict[str, int]:
        """How many sessions each per-session structure holds: every one follows the warm sessions (or the
        marks) and none grows with sessions cycled (docs/operations.md)."""
        return {"warm": len(self._warm), "epochs": len(self._epochs), "idle_index": len(self._idle),
                "early_twins": sum(1 for w in self._warm.values() if w._early is not None),
                "refused": len(self._refused), "parked": len(self._parked),
                "deleted": len(self._deleted), "subscribed": len(self._subscribers)}

    def churn(self) -> tuple[int, int]:
        """(followers stopped since start, warm sessions now)."""
        return self._stopped, len(self._warm)

    # -- a warm session's life (the registry) -------------------------------------------------------------
    def add(self, session_id: str, task: asyncio.Task[None], now: float, reason: str,
            failures: FailureStreak) -> WarmSession:
        w = self._warm[session_id] = WarmSession(task, now, reason, failures)
        self._idle.track(session_id, w, now)
        return w

    def touch(self, session_id: str, now: float) -> bool:
        """Activity of a warm session (it delays idle release); False if it is not warm."""
        w = self._warm.get(session_id)
        if w is None:
            return False
        w._last_activity = now
        return True

    def stop(self, w: WarmSession, mode: StopMode) -> None:
        """The session's follower stops (its task is cancelled); `mode` says what happens to its lease."""
        w._stop_mode = mode
        w.task.cancel()

    def removed(self, session_id: str, w: WarmSession) -> bool:
        """The session's task ended; True if it was the warm one (and is gone now). The idle index may hold
        `w` until its horizon passes (idle_due): not its follower, whose turn state and waiting twins are
        the session's memory."""
        current = self._warm.get(session_id) is w
        if current:
            del self._warm[session_id]
            self._epochs.pop(session_id, None)
        w._follower = None
        w._early = None
        self._stopped += 1
        return current

    # -- a warm session's follower (the runner) -----------------------------------------------------------
    def hold(self, session_id: str, epoch: int | None, now: float | None = None) -> None:
        """The lease epoch we hold for the session (None: none); a claim (`now`) ends a peer's refusal."""
        if epoch is None:
            self._epochs.pop(session_id, None)
            return
        self._epochs[session_id] = epoch
        self._refused.pop(session_id, None)
        w = self._warm.get(session_id)
        if w is not None and now is not None:
            w._claimed_at = now

    def follow_with(self, w: WarmSession, make: FollowerMaker) -> Follower:
        """The session's follower from now on, given the twins kept while it was claimed."""
        early, w._early = w._early, None
        w._follower = make(early)
        return w._follower

    def committed(self, w: WarmSession, now: float) -> None:
        w._last_activity = now
        w.failures.succeeded()

    # -- marks ------------------------------------------------------------------------------------------
    def mark_deleted(self, session_id: str) -> None:
        self._deleted.add(session_id)

    def park(self, session_id: str, reason: str) -> None:
        self._epochs.pop(session_id, None)
        self._parked[session_id] = reason

    def unpark(self, session_id: str) -> None:
        self._parked.pop(session_id, None)

    def refuse(self, session_id: str, until: float) -> None:
        """A peer writes the session now: not asked again before `until` (unless insistently)."""
        self._refused[session_id] = until

    def forget_refusals_before(self, now: float) -> None:
        for sid in [sid for sid, until in self._refused.items() if until <= now]:
            del self._refused[sid]

    def set_subscribers(self, session_id: str, count: int) -> None:
        if count > 0:
            self._subscribers[session_id] = count
        else:
            self._subscribers.pop(session_id, None)

