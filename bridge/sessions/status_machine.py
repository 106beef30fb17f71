"""The session status machine (pure; the clock is an argument).

Upstream has no end-of-turn event (docs/upstream.md §4): a turn's end is only visible as "the session left
`GET /api/session/active`". So the status is derived from two inputs:

- committed durable events (`on_events`): a prompt or step makes the session `running`;
- observations of `/api/session/active` (`on_active`), each stamped with the time its request *started*.

A "not active" observation closes the turn, and how it closes depends on what the events left open:

- nothing open → `idle`;
- a prompt taken (`prompted`) but no step started for `stall_timeout_s` → `stalled`: the silent failure
  of a model without a provider or credential (docs/upstream.md §4);
- a step started and never ended → `interrupted`: the upstream restarted mid-turn (§7) or the provider
  stream was cut (§4); the bridge closes the turn since upstream never will.

A session whose agent waits for a person — a permission request or a question pending (docs/upstream.md
§4.4, §18; bridge.events.pending) — is `waiting` (the reason says what for and since when) whatever the
poll says: a legacy turn waiting on a question is not listed by `/api/session/active` (§18), and neither
`stalled` nor `interrupted` fits a turn that is only waiting. Answered, it is `running` again.

Two races are guarded. An observation that started before our latest event is stale (the poll may
predate the prompt) and is ignored. And our durable stream lags the upstream by a little, so an open step
is only closed after "not active" held for `settle_s` with no new event (else a poll landing between the
upstream's `step.ended` and our receiving it would flash `interrupted`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from bridge.events.pending import waiting_reason


class Status(enum.StrEnum):
    IDLE = "idle"  # no turn running
    RUNNING = "running"  # a turn is running (events, or listed by /api/session/active)
    RETRYING = "retrying"  # upstream retries the provider (`session.status` retry); reason: attempt, next, message
    STALLED = "stalled"  # prompt taken, no step started, not active: the turn silently failed
    INTERRUPTED = "interrupted"  # a step was left open and the session is no longer active
    DELETED = "deleted"  # deleted upstream: terminal
    PARKED = "parked"  # its follower kept failing: no longer retried until warmed explicitly (parking.py)
    WAITING = "waiting"  # the agent waits for a person: reason `<permission|question> since <ISO time>`



# Kinds that mean "a turn is in progress" (bridge.events kinds of session.next.*).
_PROMPT = frozenset({"prompt:admitted", "prompt:started"})
_STEP_START = "step:start"
_STEP_END = frozenset({"step:end", "step:fail"})
_TURN_KINDS = _PROMPT | {_STEP_START} | _STEP_END | frozenset(
    {
        "text:start",
        "text:end",
        "reasoning:start",
        "reasoning:end",
        "tool:input-start",
        "tool:input-end",
        "tool:start",
        "tool:success",
        "tool:fail",
    }
)


@dataclass(frozen=True)
class Transition:
    status: Status
    reason: str | None


class TurnTracker:
    """One session's status. Every method returns the new `Transition`, or None if nothing changed."""

    def __init__(self, stall_timeout_s: float, settle_s: float = 2.0, status: Status = Status.IDLE) -> None:
        self.stall_timeout_s = stall_timeout_s
        self.settle_s = settle_s
        self.status = status
        self.reason: str | None = None
        self.prompted_at: float | None = None  # a prompt waits for its first step since then
        self.step_open = False
        self.last_event_at: float | None = None
        self.inactive_since: float | None = None  # first "not active" observation after our last event
        self.waiting: tuple[str, datetime] | None = None  # what the agent waits for, since when

    def _move(self, status: Status, reason: str | None) -> Transition | None:
        if (status, reason) == (self.status, self.reason):
            return None
        self.status, self.reason = status, reason
        return Transition(status, reason)

    def on_events(self, kinds: Iterable[str], now: float) -> Transition | None:
        if self.status is Status.DELETED:
            return None
        turn = False
        for kind in kinds:
            if kind not in _TURN_KINDS:
                continue
            turn = True
            if kind == "prompt:started" or (kind == "prompt:admitted" and self.prompted_at is None):
                self.prompted_at = now
            elif kind == _STEP_START:
                self.prompted_at = None
                self.step_open = True
            elif kind in _STEP_END:
                self.step_open = False
        if not turn:
            return None
        self.last_event_at = now
        self.inactive_since = None
        if self.waiting is not None:
            return self._move(Status.WAITING, waiting_reason(*self.waiting))
        return self._move(Status.RUNNING, None)

    def on_waiting(self, waiting: tuple[str, datetime] | None, now: float,
                   declined: bool = False) -> Transition | None:
        """What the session's agent waits for now (bridge.events.pending), None: nothing any more.
        `declined`: a question was rejected, which stops the turn upstream without ending its step
        (`tool.failed` "Tool execution interrupted", no `step.ended`, docs/upstream.md §18): the turn then
        ends `idle`, not `interrupted`."""
        if self.status is Status.DELETED:
            return None
        if declined:
            self.step_open = False
        was, self.waiting = self.waiting, waiting
        self.inactive_since = None
        if waiting is not None:
            return self._move(Status.WAITING, waiting_reason(*waiting))
        if was is None and self.status is not Status.WAITING:
            return None
        self.last_event_at = now  # answered: the turn goes on; only a later poll may end it
        return self._move(Status.RUNNING, None)

    def on_upstream_status(self, status_type: str, reason: str | None, now: float) -> Transition | None:
        """A `session.status` of `/global/event` (docs/upstream.md §15): `retry` → `retrying` (the reason
        says attempt, next time and upstream's message), `busy` → `running`. `idle` changes nothing here:
        it can come before the turn's last updates (§16), so the caller cross-checks with
        `/api/session/active` (`on_active`)."""
        if self.status is Status.DELETED:
            return None
        if status_type == "retry":
            self.last_event_at = now
            self.inactive_since = None
            return self._move(Status.RETRYING, reason)
        if status_type == "busy" and self.status not in (Status.RUNNING, Status.WAITING):
            self.last_event_at = now
            self.inactive_since = None
            return self._move(Status.RUNNING, None)
        return None

    def on_active(self, active: bool, observed_at: float, now: float) -> Transition | None:
        """`observed_at`: when the /api/session/active request started; `now`: when it answered."""
        if self.status is Status.DELETED:
            return None
        if self.last_event_at is not None and observed_at < self.last_event_at:
            return None  # the observation predates our latest event: it says nothing about it
        if self.waiting is not None:
            return None  # waits for a person: neither stalled, interrupted nor idle (legacy turns are not listed)
        if active:
            self.inactive_since = None
            if self.status is Status.RETRYING:
                return None  # still in the turn, still retrying: the next event or status says more
            return self._move(Status.RUNNING, None)
        if self.inactive_since is None:
            self.inactive_since = observed_at
        settled = observed_at - self.inactive_since >= self.settle_s
        if self.prompted_at is not None:
            if self.status is Status.STALLED:
                return None  # said once; the reason's "N s ago" must not re-announce it on every poll
            waited = now - self.prompted_at
            if waited >= self.stall_timeout_s and settled:
                return self._move(
                    Status.STALLED,
                    f"prompt taken {waited:.0f} s ago but no step started and the session is not active "
                    "upstream: the model is probably unavailable (no provider or credential); see the "
                    "opencode server log",
                )
            return None
        if self.step_open:
            if not settled:
                return None
            self.step_open = False
            return self._move(
                Status.INTERRUPTED,
                "turn cut: a step was still open when the session stopped being active upstream "
                "(upstream restart or provider stream cut)",
            )
        if self.status in (Status.RUNNING, Status.RETRYING):
            return self._move(Status.IDLE, None)
        return None

    def on_deleted(self) -> Transition | None:
        self.prompted_at = None
        self.step_open = False
        return self._move(Status.DELETED, "deleted upstream")

    @property
    def quiet(self) -> bool:
        """An observation "not active" would change nothing (`on_active(False, …)` returns None and leaves
        every field as it is): no turn, step, wait or stall clock is open, and the inactivity is already
        noted. Anything that changes that goes through an input the owner watches again
        (bridge.sessions.activity), so a poll need not visit quiet machines."""
        if self.status is Status.DELETED:
            return True
        return (self.waiting is None and not self.step_open and self.inactive_since is not None
                and self.status not in (Status.RUNNING, Status.RETRYING)
                and (self.prompted_at is None or self.status is Status.STALLED))

    @property
    def wants_polling(self) -> bool:
        """A turn may be running: poll /api/session/active quickly until it settles."""
        return self.status in (Status.RUNNING, Status.RETRYING)
