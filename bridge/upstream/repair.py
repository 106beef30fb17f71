"""One cursor, two sources: every write of one session goes through its `SyncRepair` (docs/mirror.md).

The cursor is the highest seq such that every seq up to it is stored. The sync log
(`POST /sync/history {sid: cursor}`, docs/upstream.md §14) is the source of truth for seqs: gap-free, legacy
and v2 events in one order, with the durable stream's ids and seqs. The durable stream is the low-latency
push of its v2 subset, and the exact sync twins of `/global/event` (§15) the low-latency push of the rest.

- A batch (durable stream, `/history`) whose first new seq is above cursor+1 is preceded by a **repair**:
  the log is read from the cursor and stored first; what the batch still holds above the new cursor is then
  written (what the repair stored already is skipped: same id, same seq).
- An exact twin at cursor+1 is stored directly (no REST call); twins above it wait for the hole to fill
  for `debounce_s`, then poke a repair. Pokes coalesce: at most one repair runs per session, so a long
  legacy turn costs a handful of requests.
- Only a hole the sync log itself lacks is left: the rows after it are stored, the activity tracker
  records the gap (`chat_session_gaps`, `incomplete`, metric, warning).

All writes of the session hold `lock`, and re-read the cursor under it; everything is idempotent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import BadFrame, BodyTooLarge, InvalidRequest, SessionNotFound, UpstreamError
from bridge.events import ChatEvent, Envelope, Kind
from bridge.events.legacy import LegacyTurnState, normalize_legacy
from bridge.events.syncframes import contiguous_run, parse_sync_item
from bridge.perf import turnstile
from bridge.upstream.client import UpstreamClient

Commit = Callable[[list[ChatEvent], datetime, str], Awaitable[None]]
Reject = Callable[[str, str, datetime, "int | None", str], Awaitable[None]]

MAX_PENDING_TWINS = 2000  # more waiting twins than this: drop them, the repair reads the log anyway


def _json_text(item: object) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=repr)


class SyncRepair:
    def __init__(self, session_id: str, client: UpstreamClient, cursor: Callable[[], int], commit: Commit,
                 reject: Reject, log: FilteringBoundLogger, *, debounce_s: float = 0.03,
                 retry_s: float = 1.0) -> None:
        self._sid = session_id
        self._client = client
        self._cursor = cursor
        self._commit = commit
        self._reject = reject
        self._log = log
        self._debounce_s = debounce_s
        self._retry_s = retry_s
        self.state = LegacyTurnState()
        self.lock = asyncio.Lock()
        self._twins: dict[int, Envelope] = {}
        self._wanted: str | None = None  # the cause of a requested repair not yet run
        self._wake = asyncio.Event()
        self.repairs = 0  # sync-log reads so far (tests, bench)
        self.twins_written = 0

    def map(self, env: Envelope) -> ChatEvent:
        """Normalize one event of this session (legacy types through the session's turn state); feed
        events in seq order, each once (a repeat maps to the same kind)."""
        return normalize_legacy(env, self.state)

    # -- hints from the live stream -----------------------------------------------------------------
    def offer(self, env: Envelope) -> None:
        """An exact sync twin (its payload is the sync log's): stored as soon as it is next in line."""
        if env.seq is None or env.seq <= self._cursor():
            return
        if len(self._twins) >= MAX_PENDING_TWINS:
            self._twins.clear()
            self._wanted = self._wanted or "twin_overflow"
        self._twins[env.seq] = env
        self._wake.set()

    def request(self, cause: str) -> None:
        """Read the sync log from the cursor soon (coalesced with every other request and twin)."""
        self._wanted = self._wanted or cause
        self._wake.set()

    # -- the inbox task -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Forever: store waiting twins, repair when asked or when a hole stays open. Store errors
        (lease lost, database) propagate: the follower ends or restarts."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            hole = await self._drain_twins()
            if not hole and self._wanted is None:
                continue
            await asyncio.sleep(self._debounce_s)  # a burst of twins and pokes costs one request
            self._wake.clear()
            if await self._drain_twins() or self._wanted is not None:
                await self._repair(self._wanted or "twin_hole")

    async def _drain_twins(self) -> bool:
        """Store the twins that continue the cursor; True if some wait above a hole."""
        async with self.lock:
            cursor = self._cursor()
            for seq in [s for s in self._twins if s <= cursor]:
                del self._twins[seq]
            if not self._twins:
                return False
            run = contiguous_run(cursor, list(self._twins.values()))
            if run.events:
                for env in run.events:
                    del self._twins[env.seq]  # type: ignore[arg-type]  # a run has seqs only
                self.twins_written += len(run.events)
                metrics.TWINS_WRITTEN.inc(len(run.events))
                await self._commit([self.map(e) for e in run.events], datetime.now(UTC), "twin")
            return bool(self._twins)

    async def _repair(self, cause: str) -> None:
        try:
            async with self.lock:
                self._wanted = None
                if await self.repair_locked(cause) < 0:
                    await self._twins_over_a_hole()
                cursor = self._cursor()
                for seq in [s for s in self._twins if s <= cursor]:
                    del self._twins[seq]
        except (SessionNotFound, InvalidRequest) as e:  # the follower's own requests end it
            self._log.warning("sync_repair_refused", cause=cause, error=str(e))
        except UpstreamError as e:
            self._log.warning("sync_repair_failed", cause=cause, error=str(e))
            await asyncio.sleep(self._retry_s)
            self.request(cause)

    async def _twins_over_a_hole(self) -> None:
        """The log could not be read (over the body bound): store the waiting twins as they are, so the
        hole before them becomes a recorded gap instead of a repair retried on every twin."""
        cursor = self._cursor()
        waiting = [self._twins.pop(s) for s in sorted(self._twins) if s > cursor]
        self._twins.clear()
        if waiting:
            metrics.TWINS_WRITTEN.inc(len(waiting))
            await self._commit([self.map(e) for e in waiting], datetime.now(UTC), "twin")

    # -- writes -----------------------------------------------------------------------------------------
    async def write(self, events: Sequence[ChatEvent], received_at: datetime, source: str) -> None:
        """Store a batch of the durable stream or `/history`, repairing first if it starts above the
        cursor + 1."""
        async with self.lock:
            cursor = self._cursor()
            fresh = [e for e in events if e.seq is not None and e.seq > cursor]
            if fresh and contiguous_run(cursor, [e.envelope for e in fresh]).missing_from is not None:
                await self.repair_locked(f"{source}_ahead")
                cursor = self._cursor()
                skipped = sum(1 for e in fresh if e.seq is not None and e.seq <= cursor)
                if skipped:
                    metrics.EVENTS_DUPLICATE.inc(skipped)
                fresh = [e for e in fresh if e.seq is not None and e.seq > cursor]
            await self._commit(fresh, received_at, source)

    async def repair_locked(self, cause: str) -> int:
        """Read the sync log after the cursor and store it (the caller holds `lock`); returns the number
        of events stored, or -1 when the log is over the client's body bound and was not read: the
        caller's events are then stored with a hole, which is recorded as a gap (docs/mirror.md)."""
        cursor = self._cursor()
        self.repairs += 1
        metrics.SYNC_REPAIRS.labels(cause=cause).inc()
        try:
            items = await self._client.sync_history(self._sid, cursor)
        except BodyTooLarge as e:
            metrics.REJECTS.labels(reason="sync_log_too_large").inc()
            self._log.error("sync_log_too_large", cursor_seq=cursor, error=str(e))
            return -1
        received_at = datetime.now(UTC)
        envs = await self._accepted(items, cursor, received_at)
        run = contiguous_run(cursor, envs)
        if run.missing_from is not None:
            metrics.SYNC_LOG_HOLES.inc()
            self._log.warning("sync_log_hole", cursor_seq=cursor, missing_from=run.missing_from)
        events = [self.map(e) for e in envs]
        for ev in events:
            if ev.kind is Kind.UNKNOWN:
                metrics.UNKNOWN_EVENTS.labels(stream="sync").inc()
        metrics.SYNC_REPAIRED_EVENTS.inc(len(events))
        self._log.debug("sync_repair", cause=cause, cursor_seq=cursor, events=len(events))
        await self._commit(events, received_at, "sync")
        return len(events)

    async def _accepted(self, items: list[object], cursor: int, received_at: datetime) -> list[Envelope]:
        """The log's events of this session above `cursor`, once each, in seq order; bad ones rejected."""
        by_seq: dict[int, Envelope] = {}
        for i, item in enumerate(items):
            if i % 200 == 0:  # a whole log is parsed here: bounded per loop turn (bridge.perf.turnstile)
                await turnstile.for_loop().enter()
            try:
                env = parse_sync_item(item)
            except BadFrame as e:
                await self._reject(e.reason, _json_text(item), received_at, None, str(e))
                continue
            if env.aggregate_id != self._sid:
                continue  # the log of an aggregate the request could not leave out (§14): not ours
            if env.seq is not None and env.seq > cursor:
                by_seq.setdefault(env.seq, env)
        return [by_seq[s] for s in sorted(by_seq)]
