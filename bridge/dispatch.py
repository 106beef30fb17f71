"""The one table of where `/api/event` traffic goes (all of it hints or ephemeral, never stored as truth).

| what | to |
|---|---|
| (re)connected | discovery (hints were lost meanwhile: look for sessions with news); permission re-sync |
| deltas, permission requests | the fan-out's relay, first (they are latency-bound) |
| `session.deleted` | the sessions part: stop following, record the deletion |
| any other event of a session | the sessions part: warm it (the event type is the reason) |
| a v2 event with a durable seq | the session's follower: the stall watchdog expects that seq |
| a legacy-only event with a seq | the sessions part: the mirror is incomplete (docs/lifecycle.md) |

Parts a test does not wire are None.
"""

from __future__ import annotations

from typing import Protocol

from bridge.events import ChatEvent
from bridge.fanout.relay import LiveRelay, PermissionResync
from bridge.sessions.discovery import Discovery

# Legacy writes burn durable seqs without delivering them on the durable stream (docs/upstream.md §3.1).
_LEGACY_WITH_SEQ = frozenset({"session.updated", "message.updated", "message.part.updated"})


class LiveSessions(Protocol):
    """What the table asks of the sessions part (bridge.sessions.supervisor.FollowerSupervisor)."""

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...
    def notify_seen(self, session_id: str, seq: int) -> None: ...
    def notify_legacy_seq(self, session_id: str, seq: int) -> None: ...
    async def deleted(self, session_id: str) -> None: ...


def _directory(ev: ChatEvent) -> str | None:
    loc = ev.envelope.raw.get("location")
    directory = loc.get("directory") if isinstance(loc, dict) else None
    return directory if isinstance(directory, str) else None


class LiveDispatch:
    """A `bridge.upstream.live.LiveHandler`."""

    def __init__(self, *, relay: LiveRelay | None = None, resync: PermissionResync | None = None,
                 sessions: LiveSessions | None = None, discovery: Discovery | None = None) -> None:
        self._relay = relay
        self._resync = resync
        self._sessions = sessions
        self._discovery = discovery

    async def on_live_connected(self) -> None:
        if self._resync is not None:
            self._resync.request()  # runs in the fan-out's task: the live reader is never blocked
        if self._discovery is not None:
            self._discovery.request()

    async def on_live_event(self, ev: ChatEvent) -> None:
        sid = ev.envelope.session_id
        if not sid:
            return
        if self._relay is not None:
            await self._relay.on_live_event(ev)
        if self._sessions is None:
            return
        if ev.kind == "session:deleted":
            await self._sessions.deleted(sid)
            return
        self._sessions.warm(sid, _directory(ev), reason=ev.type)
        # Only v2 events reach the durable stream, so only they arm the stall watchdog.
        if ev.seq is not None and ev.type.startswith("session.next."):
            self._sessions.notify_seen(sid, ev.seq)
        elif ev.seq and ev.type in _LEGACY_WITH_SEQ:
            self._sessions.notify_legacy_seq(sid, ev.seq)
