"""Idle GC policy (pure): when may a warm session be *released*?

Release stops our following (the follower, the lease); the cursor and history stay and the upstream
session is untouched. It is never an interrupt (`POST /api/session/{id}/interrupt`), which only an
explicit request does. A session is released only when nothing could need it soon.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.sessions.status_machine import Status


@dataclass(frozen=True)
class WarmFacts:
    now: float
    last_activity_at: float  # warmed, last committed durable event, or last live hint: the latest
    status: Status
    active_upstream: bool  # listed by the latest /api/session/active
    subscribers: int  # local WebSocket subscribers
    # The follower holds events above a hole, or a repair is asked: released now, what it holds would wait
    # for the session's next live event (docs/lifecycle.md "Idle release").
    behind: bool = False


def release_reason(facts: WarmFacts, idle_ttl_s: float) -> str | None:
    """A reason to release now, or None to keep the session warm."""
    if facts.subscribers > 0 or facts.behind:
        return None
    if facts.active_upstream or facts.status in (Status.RUNNING, Status.RETRYING):
        return None  # a turn may be running: never drop it mid-turn
    idle = facts.now - facts.last_activity_at
    if idle < idle_ttl_s:
        return None
    return f"idle {idle:.0f} s (idle_ttl {idle_ttl_s:g} s), not active upstream, no subscribers"
