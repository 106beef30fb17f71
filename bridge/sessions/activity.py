"""What the sessions we own are doing: one status machine each, fed in order, and the writes it causes.

Inputs: batches committed by a session's follower (`committed`), observations of
`GET /api/session/active` (`observe_active`, from bridge.sessions.poller), a deletion (`deleted`), a
`session.status` / `session.idle` of `/global/event` (`upstream_status`), a change of a pending request
(`request_changed`, from the fan-out's relay and re-sync: `waiting`). Outputs: status transitions
(`retrying` included), seq gaps (seqs the sync log itself lacks, docs/mirror.md) with the incomplete flag,
and session titles, written to the database in the order they happened by one writer task (`run`), since
the inputs come from synchronous callbacks. A status is written only while we hold the session's lease;
the write sends `NOTIFY bridge_status`, which is how every process (this one too) tells its WebSocket
subscribers (docs/websocket.md). What is queued when the writer looks goes in one transaction
(`bridge.sessions.activity_batch`): a sweep or a warm-up of a thousand sessions is a few statements.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import structlog

from bridge import metrics
from bridge.events import ChatEvent
from bridge.events.legacy_shapes import SessionStatus, session_title
from bridge.events.pending import QUESTION, REJECTED, PendingRequests, RequestChange, stored_waiting
from bridge.sessions.activity_batch import Gap, StatusRounds, Title, Write, plan_writes
from bridge.sessions.gaps import find_gaps
from bridge.sessions.status_machine import Status, Transition, TurnTracker
from bridge.store.chat_sessions import TurnState

_TITLED = frozenset({"session:created", "session:updated"})  # kinds whose payload carries the title

# Settle time before an open step is closed as interrupted (see bridge.sessions.status_machine).
TURN_SETTLE_S = 2.0


class LifecycleStore(Protocol):
    """The part of bridge.store.chat_sessions.leases.LeaseStore this module needs (an in-memory twin in unit tests)."""

    async def turn_state(self, session_id: str) -> TurnState: ...
    async def set_status(self, session_id: str, owner: str, status: str, reason: str | None) -> bool: ...
    async def record_gap(self, session_id: str, from_seq: int, to_seq: int) -> None: ...
    async def set_title(self, session_id: str, title: str) -> None: ...
    async def write_activity(self, owner: str, rounds: StatusRounds,
                             titles: Sequence[tuple[str, str]]) -> list[set[str]]: ...


MAX_WRITES_PER_BATCH = 2000


def retry_reason(st: SessionStatus, now_ms: float) -> str:
    """The status reason of `retrying`: attempt, when the next one is due and upstream's message (display
    text, never interpreted), e.g. `attempt 2, next in 8 s (2026-12-01T09:30:08Z): Rate limited`."""
    parts = [f"attempt {st.attempt}" if st.attempt is not None else "retrying"]
    if st.next_ms is not None:
        at = datetime.fromtimestamp(st.next_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        parts.append(f"next in {max(0, round((st.next_ms - now_ms) / 1000))} s ({at})")
    text = ", ".join(parts)
    return f"{text}: {st.message[:500]}" if st.message else text


class ActivityTracker:
    def __init__(self, store: LifecycleStore, owner: str, stall_timeout_s: float, *,
                 clock: Callable[[], float], upstream: str = "",
                 on_idle: Callable[[str], None] | None = None) -> None:
        self._store = store
        self._owner = owner
        self._stall_timeout_s = stall_timeout_s
        self._clock = clock
        self._trackers: dict[str, TurnTracker] = {}
        self._last_seq: dict[str, int] = {}
        self._active: set[str] = set()
        # Sessions whose machine a "not active" observation may still move (not `quiet`): a poll visits
        # these and the ones listed active, not every warm session (10,000 warm idle sessions cost a walk
        # of 40 to 60 ms per poll before).
        self._watched: set[str] = set()
        self._titles: dict[str, str] = {}
        self._writes: asyncio.Queue[tuple[str, Write]] = asyncio.Queue()
        self._turn_started = asyncio.Event()
        self._requests = PendingRequests()  # every session's, owned or not: a later claim starts from it
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=upstream, owner=owner)
        # Told when a session of ours goes idle upstream: the legacy queue's sender looks then.
        self._on_idle = on_idle

    # -- queries ----------------------------------------------------------------------------------
    def status(self, session_id: str) -> Status | None:
        t = self._trackers.get(session_id)
        return None if t is None else t.status

    def reason(self, session_id: str) -> str | None:
        t = self._trackers.get(session_id)
        return None if t is None else t.reason

    def footprint(self) -> dict[str, int]:
        """How many sessions each per-session structure holds (docs/operations.md "Memory for weeks")."""
        return {"status_machines": len(self._trackers), "last_seq": len(self._last_seq),
                "watched": len(self._watched), "titles": len(self._titles),
                "pending_requests": self._requests.sessions()}

    def is_active(self, session_id: str) -> bool:
        """Listed by the latest `/api/session/active`."""
        return session_id in self._active

    @property
    def wants_polling(self) -> bool:
        return any(t.wants_polling for sid in self._watched if (t := self._trackers.get(sid)) is not None)

    def clear_wake(self) -> None:
        """The poller is about to look: only a turn starting after this wakes `wait_for_turn`."""
        self._turn_started.clear()

    async def wait_for_turn(self, timeout_s: float) -> bool:
        """Wait until a session turns `running` (True) or `timeout_s` passed (False)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._turn_started.wait()
                return True
        return False

    # -- inputs -----------------------------------------------------------------------------------
    async def resume(self, session_id: str, cursor: int, state: TurnState | None = None) -> None:
        """A session was claimed: continue its status machine from what is stored (a turn the previous
        owner saw start is still open for us and may end idle, stalled or interrupted). `state`: as the
        claim read it (bridge.sessions.session_run), else read here."""
        tracker = TurnTracker(self._stall_timeout_s, TURN_SETTLE_S)
        state = state or await self._store.turn_state(session_id)
        if state.status == Status.RUNNING.value:
            tracker.on_events(state.tail_kinds, self._clock())
            # Running without stored turn events (seen only in /api/session/active): still running, so
            # that the next "not active" observation settles it instead of leaving it running forever.
            tracker.status, tracker.reason = Status.RUNNING, None
            self._turn_started.set()
        elif state.status == Status.PARKED.value:
            self._emit(session_id, Transition(Status.IDLE, None))  # following again: no longer parked
        elif state.status in Status.__members__.values():
            tracker.status, tracker.reason = Status(state.status), state.reason
        self._trackers[session_id] = tracker
        self._watched.add(session_id)
        self._last_seq[session_id] = cursor
        # What the agent waits for: as this process saw it (relay, re-sync), else as stored (the reason).
        waiting = self._requests.waiting(session_id)
        if waiting is None and state.status == Status.WAITING.value:
            tracker.waiting = stored_waiting(state.reason)
        elif waiting is not None:
            self._emit(session_id, tracker.on_waiting(waiting, self._clock()))

    def request_changed(self, change: RequestChange) -> None:
        """A permission request or question was asked or settled (bridge.fanout.relay): `waiting` or back."""
        if not self._requests.apply(change):
            return
        t = self._trackers.get(change.session_id)
        self._watched.add(change.session_id)
        if t is not None:
            declined = change.kind == QUESTION and change.state == REJECTED
            self._emit(change.session_id, t.on_waiting(self._requests.waiting(change.session_id), self._clock(),
                                                       declined))

    def forget(self, session_id: str) -> None:
        """Its follower stopped: we no longer speak for it."""
        if self._requests.waiting(session_id) is None:
            self._requests.forget(session_id)
        self._trackers.pop(session_id, None)
        self._watched.discard(session_id)
        self._last_seq.pop(session_id, None)
        self._titles.pop(session_id, None)

    def committed(self, session_id: str, events: Sequence[ChatEvent]) -> None:
        seqs = [e.seq for e in events if e.seq is not None]
        last = self._last_seq.get(session_id, 0)
        for a, b in find_gaps(last, seqs):
            self._writes.put_nowait((session_id, Gap(a, b)))
        if seqs:
            self._last_seq[session_id] = max(last, *seqs)
        titles = [title for e in events if e.kind in _TITLED and (title := session_title(e.envelope)) is not None]
        if titles and self._titles.get(session_id) != titles[-1]:
            self._titles[session_id] = titles[-1]
            self._writes.put_nowait((session_id, Title(titles[-1])))
        t = self._trackers.get(session_id)
        if t is not None:
            self._watched.add(session_id)
            self._emit(session_id, t.on_events([e.kind for e in events], self._clock()))

    def upstream_status(self, session_id: str, st: SessionStatus) -> None:
        """`session.status` of `/global/event`: retry → `retrying`, busy → `running`; idle wakes the poller,
        whose `/api/session/active` answer ends the turn (idle may precede the last updates, §16)."""
        t = self._trackers.get(session_id)
        if t is None:
            return
        self._watched.add(session_id)
        reason = retry_reason(st, time.time() * 1000) if st.type == "retry" else None
        self._emit(session_id, t.on_upstream_status(st.type, reason, self._clock()))
        if st.type == "idle":
            self._turn_started.set()  # look now
            if self._on_idle is not None:
                self._on_idle(session_id)

    def observe_active(self, active: Iterable[str], observed_at: float) -> None:
        """`observed_at`: when the `/api/session/active` request started."""
        now = self._clock()
        self._active = set(active)
        for sid in sorted(self._watched | (self._active & self._trackers.keys())):
            t = self._trackers.get(sid)
            if t is None:
                self._watched.discard(sid)
                continue
            listed = sid in self._active
            self._emit(sid, t.on_active(listed, observed_at, now))
            if listed or not t.quiet:
                self._watched.add(sid)
            else:
                self._watched.discard(sid)

    def deleted(self, session_id: str) -> None:
        """Recorded by the store already (terminal, NOTIFY sent): only logged and counted here."""
        tracker = self._trackers.get(session_id)
        tr = tracker.on_deleted() if tracker is not None else None
        self.forget(session_id)
        self._emit(session_id, tr or Transition(Status.DELETED, "deleted upstream"))

    def _emit(self, session_id: str, tr: Transition | None) -> None:
        if tr is None:
            return
        if tr.status is Status.RUNNING:
            self._turn_started.set()
        self._writes.put_nowait((session_id, tr))

    # -- the writer ---------------------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            batch = [await self._writes.get()]
            while len(batch) < MAX_WRITES_PER_BATCH and not self._writes.empty():
                batch.append(self._writes.get_nowait())
            try:
                await self._write(batch)
            except Exception as e:
                self._log.warning("lifecycle_write_failed", session_id=batch[0][0], writes=len(batch),
                                  error=f"{type(e).__name__}: {e}")

    async def _write(self, batch: list[tuple[str, Write]]) -> None:
        plan = plan_writes(batch)
        for sid, gap in plan.gaps:
            await self._store.record_gap(sid, gap.from_seq, gap.to_seq)
            metrics.SESSION_GAPS.inc()
            self._log.warning("seq_gap_recorded", session_id=sid, from_seq=gap.from_seq, to_seq=gap.to_seq)
        written = await self._store.write_activity(self._owner, plan.status_rounds, plan.titles)
        for sid, tr, k in plan.transitions:
            if k is not None and sid not in written[k]:
                continue  # not ours any more: the new owner speaks for it
            self._log.info("session_status", session_id=sid, status=tr.status.value, reason=tr.reason)
            metrics.SESSION_STATUS.labels(status=tr.status.value).inc()
