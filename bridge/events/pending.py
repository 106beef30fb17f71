"""What the agent waits for: the pending requests (permission requests and questions) of sessions, one
state machine for both kinds and both runtimes (docs/upstream.md §4.4, §16, §18; docs/lifecycle.md). Pure:
no I/O, the time of each change is an argument.

    (unseen) --asked--> pending --answered | rejected | unknown--> settled (final)
    (unseen) --answered | rejected | unknown--> settled  (the answer came first: the ask was missed)

A settled request stays settled: an `asked` seen after its answer (a re-sync that read the list route
before the answer, a second process recording it late) does not make it pending again, and the first
outcome wins. `waiting(session)` is what the status `waiting` says: the kind and time of the session's
oldest pending request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bridge.events.chat import ChatEvent
from bridge.events.kinds import Kind

PERMISSION, QUESTION = "permission", "question"
PENDING, ANSWERED, REJECTED, UNKNOWN = "pending", "answered", "rejected", "unknown"
SETTLED = frozenset({ANSWERED, REJECTED, UNKNOWN})

_EVENT_STATES: dict[Kind, tuple[str, str]] = {
    Kind.PERMISSION_ASKED: (PERMISSION, PENDING),
    Kind.QUESTION_ASKED: (QUESTION, PENDING),
    Kind.QUESTION_REPLIED: (QUESTION, ANSWERED),
    Kind.QUESTION_REJECTED: (QUESTION, REJECTED),
}


def permission_state(reply: str | None) -> str:
    """A permission reply as a request state: `reject` is rejected, `once`/`always` answered."""
    if reply is None:
        return PENDING
    return REJECTED if reply == "reject" else UNKNOWN if reply == "unknown" else ANSWERED


@dataclass(frozen=True)
class RequestChange:
    """One observed change of a request; `at` is when the bridge learnt of it."""

    kind: str  # permission | question
    session_id: str
    request_id: str
    state: str  # pending | answered | rejected | unknown
    at: datetime
    runtime: str = "v2"


def change_of(ev: ChatEvent, at: datetime) -> RequestChange | None:
    """The change a live permission or question event of either runtime carries (None: not one)."""
    sid, rid = ev.session_id, ev.request_id
    if not sid or not rid:
        return None
    if ev.kind == Kind.PERMISSION_REPLIED:
        return RequestChange(PERMISSION, sid, rid, permission_state(ev.reply or "unknown"), at, ev.runtime)
    found = _EVENT_STATES.get(ev.kind)
    if found is None:
        return None
    # A legacy permission event maps through bridge.events.legacy (runtime `legacy`); questions share one mapping.
    runtime = ev.runtime if found[0] == PERMISSION else "v2" if ev.type.startswith("question.v2.") else "legacy"
    return RequestChange(found[0], sid, rid, found[1], at, runtime)


@dataclass
class _Request:
    kind: str
    state: str
    asked_at: datetime | None


class PendingRequests:
    """The requests of the sessions seen so far. `apply` returns whether the change changed anything."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, _Request]] = {}

    def apply(self, change: RequestChange) -> bool:
        requests = self._sessions.setdefault(change.session_id, {})
        known = requests.get(change.request_id)
        if known is not None and known.state in SETTLED:
            return False  # final: a late ask or a second answer changes nothing
        if change.state == PENDING:
            if known is not None:
                return False
            requests[change.request_id] = _Request(change.kind, PENDING, change.at)
            return True
        requests[change.request_id] = _Request(change.kind, change.state, known.asked_at if known else None)
        return True

    def state(self, session_id: str, request_id: str) -> str | None:
        r = self._sessions.get(session_id, {}).get(request_id)
        return None if r is None else r.state

    def pending(self, session_id: str) -> list[tuple[str, str, datetime]]:
        """(kind, request id, asked at) of the session's pending requests, oldest first."""
        out = [(r.kind, rid, r.asked_at) for rid, r in self._sessions.get(session_id, {}).items()
               if r.state == PENDING and r.asked_at is not None]
        return sorted(out, key=lambda x: x[2])

    def waiting(self, session_id: str) -> tuple[str, datetime] | None:
        """What the session waits for (kind, since when): its oldest pending request; None: nothing."""
        p = self.pending(session_id)
        return None if not p else (p[0][0], p[0][2])

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def sessions(self) -> int:
        """Sessions with a pending request (or one asked since it was forgotten)."""
        return len(self._sessions)

    def snapshot(self) -> dict[str, Any]:
        """Every session's requests as plain data (tests, doctor)."""
        return {sid: {rid: r.state for rid, r in reqs.items()} for sid, reqs in self._sessions.items()}


# --- the reason of the status `waiting` (bridge.sessions.status_machine) ---------------------------------------


def waiting_reason(kind: str, since: datetime) -> str:
    """The reason of `waiting`: `question since 2026-12-01T21:10:22Z` (what for, since when)."""
    return f"{kind} since {since.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def waiting_detail(reason: str | None) -> dict[str, str] | None:
    """`{"for": kind, "since": ISO time}` of a `waiting` reason; None for any other text."""
    kind, sep, since = (reason or "").partition(" since ")
    return {"for": kind, "since": since} if sep and kind in ("permission", "question") else None


def stored_waiting(reason: str | None) -> tuple[str, datetime] | None:
    """A stored `waiting` reason back as (kind, since); None when it does not read as one."""
    detail = waiting_detail(reason)
    if detail is None:
        return None
    try:
        return detail["for"], datetime.strptime(detail["since"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
