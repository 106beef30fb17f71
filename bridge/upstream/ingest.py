"""One session's ingest, with one owner: the cursor, the lock every write holds, the legacy turn state,
commit, reject and the sync-log repair (docs/mirror.md, "One cursor, two sources").

The cursor is the highest seq such that every seq up to it is stored. The sync log
(`POST /sync/history {sid: cursor}`, docs/upstream.md §14) is the source of truth for seqs: gap-free, legacy
and v2 events in one order, with the durable stream's ids and seqs. The durable stream
(bridge.upstream.durable), the `/history` catch-up (bridge.upstream.catchup) and the exact sync twins of
`/global/event` (bridge.upstream.repair) all write through `SessionIngest`:

- A batch whose first new seq is above cursor+1 is preceded by a **repair**: the log is read from the cursor
  and stored first; what the batch still holds above the new cursor is then written (what the repair
  stored already is skipped: same id, same seq).
- Only a hole the sync log itself lacks is left: the rows after it are stored, the activity tracker
  records the gap (`chat_session_gaps`, `incomplete`, metric, warning).

Every write holds the ingest's lock, taken inside its own methods (no caller takes it), and re-reads the
cursor under it; everything is idempotent. The cursor moves only
through what the sink returns: `EventSink.write()` stores rows and cursor in one transaction (and raises
`bridge.errors.LeaseLost` when the lease moved on), so the cursor never passes an unstored event.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import BodyTooLarge, CursorBehind
from bridge.events import ChatEvent, Envelope, Kind
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.syncframes import contiguous_run
from bridge.perf.metric_batch import TALLY, child
from bridge.perf.turnstile import Turnstile
from bridge.upstream.admit import Rejected, json_text, parse_frame_item
from bridge.upstream.client import FROM_START, UpstreamClient
from bridge.upstream.follower import EventSink
from bridge.upstream.sync_items import accepted
from bridge.upstream.twin_shelf import TwinShelf

OnBatch = Callable[[Sequence[ChatEvent]], None]
StoredCursor = Callable[[], Awaitable[int | None]]
Seed = Callable[[], Awaitable[Iterable[Mapping[str, Any]]]]


@dataclass(frozen=True)
class IngestParts:
    """What a session's ingest is built with besides its session, client, sink and cursor."""

    turnstile: Turnstile  # bounds the CPU work of a read per loop turn (bridge.perf.turnstile)
    batch_max_events: int = 200
    on_batch: OnBatch | None = None
    # What the database holds now (lost commits, docs/scaling.md "Failover"), and the stored rows the
    # legacy turn state is rebuilt from after a rewind.
    stored_cursor: StoredCursor | None = None
    seed: Seed | None = None
    # What waits above the cursor (the session's SyncRepair offers to it; a durable batch fills its holes
    # from it and waits on it above a hole not shown yet).
    shelf: TwinShelf = field(default_factory=TwinShelf)


class SessionIngest:
    def __init__(self, session_id: str, client: UpstreamClient, sink: EventSink, cursor: int,
                 log: FilteringBoundLogger, parts: IngestParts) -> None:
        self.session_id = session_id
        self._cursor = cursor
        self._lock = asyncio.Lock()
        self._state = LegacyTurnState()
        self._parts = parts
        self._client = client
        self._sink = sink
        self._log = log
        self._shelf = parts.shelf
        # The last repair read the log whole: every event of this session it held is stored, no hole, no
        # reject, so the cursor is the log's end as of that read (catch-up then needs no `/history`).
        self._log_read_whole = False

    @property
    def cursor(self) -> int:
        """The highest seq such that every seq up to it is stored."""
        return self._cursor

    async def pace(self) -> None:
        """A piece of CPU work of a read: bounded per loop turn (bridge.perf.turnstile)."""
        await self._parts.turnstile.enter()

    async def seed_state(self) -> None:
        """The legacy turn state rebuilt from the stored rows (at start, and after a rewind)."""
        if self._parts.seed is not None:
            self._state = LegacyTurnState.from_rows(await self._parts.seed())

    def map(self, env: Envelope) -> ChatEvent:
        """Normalize one event of this session (legacy types through the session's turn state); feed
        events in seq order, each once (a repeat maps to the same kind)."""
        return normalize_legacy(env, self._state)

    async def accept_frames(self, frames: Sequence[str], received_at: datetime) -> list[ChatEvent]:
        """The frames of one durable read as events of this session, in order, each parsed once; a frame
        that cannot be stored is rejected and kept (the only await)."""
        out: list[ChatEvent] = []
        for data in frames:
            r = parse_frame_item(data, self.session_id, self.map, self._log)
            if isinstance(r, Rejected):
                await self.reject_item(r, received_at)
            else:
                out.append(r)
        return out

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None, detail: str) -> None:
        metrics.REJECTS.labels(reason=reason).inc()
        self._log.error("frame_rejected", reason=reason, seq=seq, detail=detail[:300])
        await self._sink.reject(reason, raw, received_at, seq)

    async def reject_item(self, r: Rejected, received_at: datetime) -> None:
        await self.reject(r.reason, r.raw, received_at, r.seq, r.detail)

    # -- writes: each takes the lock ----------------------------------------------------------------------
    async def write(self, events: Sequence[ChatEvent], received_at: datetime, source: str) -> None:
        """Store a batch of the durable stream or `/history`, repairing first if it starts above the
        cursor + 1 — unless the seqs it skips are ones `/global/event` has not shown yet (it runs behind the
        durable stream under load): the batch's events then wait on the shelf for the hole to fill
        (bridge.upstream.twin_shelf; docs/mirror.md "A repair only for a real hole")."""
        async with self._lock:
            fresh = [e for e in events if e.seq is not None and e.seq > self._cursor]
            run = contiguous_run(self._cursor, [e.envelope for e in fresh]) if fresh else None
            if run is not None and run.missing_from is not None:
                # The exact twins waiting in the holes between its seqs: a durable batch that arrives after
                # the legacy twins between its events needs no repair (docs/mirror.md rule 3).
                fill = self._shelf.fill(self._cursor, [e.envelope for e in fresh])
                fresh = sorted(fresh + [self.map(env) for env in fill], key=lambda e: e.seq or 0)
                run = contiguous_run(self._cursor, [e.envelope for e in fresh])
            if run is not None and run.missing_from is not None and source == "stream":
                now = {e.seq for e in run.events}
                ahead = [e for e in fresh if e.seq not in now]
                if self._shelf.hold_ahead(self._cursor, [e.envelope for e in ahead]):
                    metrics.DURABLE_HELD.inc(len(ahead))
                    fresh = [e for e in fresh if e.seq in now]
                    run = None
            if run is not None and run.missing_from is not None:
                await self._repair(f"{source}_ahead")
                skipped = sum(1 for e in fresh if e.seq is not None and e.seq <= self._cursor)
                if skipped:
                    metrics.EVENTS_DUPLICATE.inc(skipped)
                fresh = [e for e in fresh if e.seq is not None and e.seq > self._cursor]
            await self._commit(fresh, received_at, source)

    async def store(self, events: list[ChatEvent], received_at: datetime, source: str) -> None:
        """Store events in order, as they are (a hole before them becomes a recorded gap)."""
        async with self._lock:
            await self._commit(events, received_at, source)

    async def store_next_twins(self) -> tuple[int, bool]:
        """Store what waits on the shelf and continues the cursor: (how many, whether some wait above a hole)."""
        async with self._lock:
            self._shelf.forget_through(self._cursor)
            run = self._shelf.take_next(self._cursor)
            if run:
                await self._commit([self.map(e) for e in run], datetime.now(UTC), "twin")
            return len(run), bool(self._shelf)

    async def catch_up(self, cause: str) -> bool:
        """Read the sync log after the cursor and store it; True when the read brought news and was whole
        (every event of the answer stored, no hole, no reject): the cursor is the log's end."""
        async with self._lock:
            got = await self._repair(cause)
            return got > 0 and self._log_read_whole

    async def repair(self, cause: str, start: Callable[[], bool]) -> int:
        """A repair asked by the live side: `start()`, called once the lock is held, says whether to check
        the stored cursor first (the database came back). What waited on the shelf before the log was read
        and is still above the cursor sits above a hole the log lacks (rule 6): stored as it is, the hole a
        recorded gap; all of it when the log was over the body bound. Returns how many of those were
        stored over a log not read."""
        async with self._lock:
            if start():
                await self._reload_cursor()
            asked = self._shelf.waiting()  # waiting before the log was read: persisted before it
            over_bound = await self._repair(cause) < 0
            waiting = self._shelf.take(None if over_bound else asked, self._cursor)
            if waiting:
                await self._commit([self.map(e) for e in waiting], datetime.now(UTC), "twin")
            self._shelf.forget_through(self._cursor)
            return len(waiting) if over_bound else 0

    # -- under the lock -----------------------------------------------------------------------------------
    async def _commit(self, events: list[ChatEvent], received_at: datetime, source: str) -> None:
        """Store events in order, in batches. One the database refuses as behind (lost commits) rewinds the
        cursor and repairs from the sync log first; what the log did not cover is then written."""
        pending, size = events, self._parts.batch_max_events
        while pending:
            batch, pending = pending[:size], pending[size:]
            t0 = time.perf_counter()
            try:
                self._cursor = await self._sink.write(batch, received_at)
            except CursorBehind as e:
                await self._rewind(e.stored, "write")
                await self._repair("cursor_behind")
                pending = [ev for ev in batch + pending if ev.seq is not None and ev.seq > self._cursor]
                continue
            self._client.note_size(self.session_id, self._cursor)  # named in every later sync-log body
            _observe(batch, time.perf_counter() - t0, source)
            self._log.debug("batch_committed", events=len(batch), cursor_seq=self._cursor, source=source)
            if self._parts.on_batch is not None:
                self._parts.on_batch(batch)

    async def _reload_cursor(self) -> None:
        if self._parts.stored_cursor is None:  # the stored cursor, if below ours, becomes ours (a repair follows)
            return
        stored = await self._parts.stored_cursor()
        if stored is None:
            # The session's row itself was lost (claimed after the standby's last WAL): end this follower;
            # its owner claims the session again (a transient failure) and catches up from the log.
            metrics.CURSOR_REWINDS.labels(cause="reconnect").inc()
            self._log.warning("session_row_lost", cursor_seq=self._cursor)
            raise CursorBehind(self.session_id, self._cursor, -1)
        if stored < self._cursor:
            await self._rewind(stored, "reconnect")
        elif stored == 0 == self._cursor:
            # A stored cursor of 0 says nothing of seq 0 (nothing stored, or seq 0 only: docs/mirror.md "Seq 0"),
            # so a lost seq 0 would go unseen: read from the start again (a seq 0 still stored is a benign duplicate).
            self._cursor = FROM_START

    async def _rewind(self, stored: int, cause: str) -> None:
        """The database lost our commits after `stored`: continue from there, the legacy turn state
        rebuilt from what is stored; the sync log gives the lost events again, same seqs and ids. From the
        start when the stored cursor is 0: seq 0 may be lost too (docs/mirror.md "Seq 0")."""
        metrics.CURSOR_REWINDS.labels(cause=cause).inc()
        self._log.warning("cursor_behind_database", cursor_seq=self._cursor, stored_cursor=stored, cause=cause)
        self._cursor = stored if stored > 0 else FROM_START
        await self.seed_state()

    async def _repair(self, cause: str) -> int:
        """Read the sync log after the cursor and store it: how many events, or -1 when the log is over the
        body bound, not read (the caller's events are stored over the hole, a recorded gap: docs/mirror.md)."""
        cursor = self._cursor
        self._log_read_whole = False
        child(metrics.SYNC_REPAIRS, cause).inc()
        try:
            items = await self._client.sync_history(self.session_id, cursor)
        except BodyTooLarge as e:
            metrics.REJECTS.labels(reason="sync_log_too_large").inc()
            self._log.error("sync_log_too_large", cursor_seq=cursor, error=str(e))
            return -1
        received_at = datetime.now(UTC)
        envs, bad = await accepted(items, self.session_id, cursor, self.pace)
        for item, err in bad:
            await self.reject(err.reason, json_text(item), received_at, None, str(err))
        run = contiguous_run(cursor, envs)
        if run.missing_from is not None:
            metrics.SYNC_LOG_HOLES.inc()
            self._log.warning("sync_log_hole", cursor_seq=cursor, missing_from=run.missing_from)
        events = [self.map(e) for e in envs]
        unknown = sum(1 for ev in events if ev.kind is Kind.UNKNOWN)
        if unknown:
            metrics.UNKNOWN_EVENTS.labels(stream="sync").inc(unknown)
        metrics.SYNC_REPAIRED_EVENTS.inc(len(events))
        self._log.debug("sync_repair", cause=cause, cursor_seq=cursor, events=len(events))
        await self._commit(events, received_at, "sync")
        top = max((e.seq for e in envs if e.seq is not None), default=cursor)
        self._log_read_whole = not bad and run.missing_from is None and self._cursor >= top
        return len(events)


def _observe(batch: Sequence[ChatEvent], seconds: float, source: str) -> None:
    """The metrics of one stored batch, written with the loop turn's other batches (docs/operations.md,
    "Metrics per batch"): a burst stores batches of one event, so that case takes the shortest way."""
    tally = TALLY
    tally.observe_one(metrics.COMMIT_SECONDS, seconds)
    tally.observe_one(metrics.BATCH_SIZE, len(batch))
    now_ms = time.time() * 1000
    if len(batch) == 1:
        ev = batch[0]
        if ev.timestamp_ms is not None:
            tally.observe_one(metrics.UPSTREAM_TO_COMMIT, max(0.0, (now_ms - ev.timestamp_ms) / 1000))
        tally.count(metrics.EVENTS_INGESTED, (ev.kind, source))
        return
    tally.observe(metrics.UPSTREAM_TO_COMMIT,
                  [max(0.0, (now_ms - t) / 1000) for t in [ev.timestamp_ms for ev in batch] if t is not None])
    for kind, n in Counter(ev.kind for ev in batch).items():
        tally.count(metrics.EVENTS_INGESTED, (kind, source), n)
