"""The one table of where `/global/event` traffic goes (docs/upstream.md §15, docs/mirror.md).

`/global/event` carries every persisted event twice: as a bus event (no seq) and as its sync twin (the sync
log's seq). Twins feed the store through the session's follower; bus events are live-only traffic.

| what | to |
|---|---|
| (re)connected | every warm session repairs from its sync log; discovery; permission re-sync |
| bus: deltas (v2 `*.delta`, legacy `message.part.delta`) | the fan-out's relay, first (latency-bound) |
| bus: permissions (`permission.v2.*`, legacy `permission.asked/replied`) | the fan-out's relay |
| bus: `session.status` (busy, retry, idle), `session.idle` | sessions: `running`, `retrying`, or a poll |
| `session.deleted` | the sessions part: stop following, record the deletion |
| any other event of a session | the sessions part: warm it (the event type is the reason) |
| twin of a legacy event (exact: the sync log's payload) | its follower: stored when next in line, else repair |
| twin of a v2 event (not exact: ISO timestamp) | its follower: the stall watchdog expects that seq (*) |
| bus copy of a persisted v2 event (`session.next.*`, no delta) | nobody: skipped, not decoded (*) |

(*) read from the frame's first bytes, not decoded (`on_durable_twin`, docs/mirror.md "Each event parsed
once").

Before any of that, a frame of a session this process has no use for is dropped undecoded
(`live_skip_reason`, docs/operations.md "Workers"): of the kinds whose every effect needs the session followed
or watched here — twins of `message.*` / `session.created` / `session.updated` and of v2 events, deltas,
`message.*` and `session.updated` bus events (bridge.events.global_peek.session_of) — when no subscriber here
watches the session and the sessions part would not warm it (a peer holds it, it is deleted or parked).
Requests, statuses, todo/diff/errors, deletions and server events are always decoded.

Parts a test does not wire are None.
"""

from __future__ import annotations

from typing import Protocol

from bridge.events import ChatEvent, Envelope
from bridge.events.global_peek import DurableTwin
from bridge.events.legacy_shapes import SessionStatus, session_status
from bridge.events.syncframes import DURABLE_PREFIX
from bridge.fanout.relay import LiveRelay
from bridge.fanout.resync import RequestResync
from bridge.sessions.discovery import Discovery


class LiveSessions(Protocol):
    """What the table asks of the sessions part (bridge.sessions.supervisor.FollowerSupervisor)."""

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...
    def notify_seen(self, session_id: str, seq: int) -> None: ...
    def twin(self, session_id: str, env: Envelope) -> None: ...
    def repair_all(self, cause: str) -> None: ...
    def upstream_status(self, session_id: str, status: SessionStatus) -> None: ...
    async def deleted(self, session_id: str) -> None: ...
    def live_skip_reason(self, session_id: str) -> str | None: ...


class LiveDispatch:
    """A `bridge.upstream.live.LiveHandler`."""

    def __init__(self, *, relay: LiveRelay | None = None, resync: RequestResync | None = None,
                 sessions: LiveSessions | None = None, discovery: Discovery | None = None) -> None:
        self._relay = relay
        self._resync = resync
        self._sessions = sessions
        self._discovery = discovery

    async def on_live_connected(self) -> None:
        if self._sessions is not None:
            self._sessions.repair_all("live_reconnect")
        if self._resync is not None:
            self._resync.request()  # runs in the fan-out's task: the live reader is never blocked
        if self._discovery is not None:
            self._discovery.request()

    def live_skip_reason(self, session_id: str) -> str | None:
        """Why a frame of the session (of the kinds above) would do nothing here, or None: no local subscriber
        watches it (its deltas go nowhere) and the sessions part would not warm it."""
        if self._sessions is None or (self._relay is not None and self._relay.watched(session_id)):
            return None
        return self._sessions.live_skip_reason(session_id)

    async def on_durable_twin(self, twin: DurableTwin) -> None:
        """The sync twin of a v2 event, not decoded (bridge.events.global_peek): warm its session, and the
        durable stream delivers that seq (the stall watchdog expects it); its bus copy was not decoded."""
        if self._sessions is None:
            return
        self._sessions.warm(twin.session_id, twin.directory, reason=twin.type)
        self._sessions.notify_seen(twin.session_id, twin.seq)

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None:
        sid = ev.envelope.session_id
        if not sid:
            return
        twin = ev.seq is not None  # on /global/event only the sync twins carry a seq
        if self._relay is not None and not twin:
            await self._relay.on_live_event(ev)
        if self._sessions is None:
            return
        if ev.kind == "session:deleted":
            await self._sessions.deleted(sid)
            return
        self._sessions.warm(sid, directory or ev.directory, reason=ev.type)
        if twin and ev.seq is not None:
            if ev.type.startswith(DURABLE_PREFIX):
                self._sessions.notify_seen(sid, ev.seq)  # the durable stream delivers it
            else:
                self._sessions.twin(sid, ev.envelope)
            return
        st = session_status(ev.envelope)
        if st is not None:
            self._sessions.upstream_status(sid, st)
        elif ev.type == "session.idle":
            self._sessions.upstream_status(sid, SessionStatus(type="idle"))
