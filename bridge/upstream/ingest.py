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

Every write holds `lock` and re-reads the cursor under it; everything is idempotent. The cursor moves only
through what the sink returns: `EventSink.write()` stores rows and cursor in one transaction (and raises
`bridge.errors.LeaseLost` when the lease moved on), so the cursor never passes an unstored event.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import BadFrame, BodyTooLarge, CursorBehind
from bridge.events import ChatEvent, Envelope, Kind, parse_frame
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.syncframes import contiguous_run, parse_sync_item
from bridge.perf.turnstile import Turnstile
from bridge.upstream.admit import Rejected, check, json_text
from bridge.upstream.client import FROM_START, UpstreamClient
from bridge.upstream.follower import EventSink

OnBatch = Callable[[Sequence[ChatEvent]], None]
StoredCursor = Callable[[], Awaitable[int | None]]
Seed = Callable[[], Awaitable[Iterable[Mapping[str, Any]]]]


class SessionIngest:
    def __init__(self, session_id: str, client: UpstreamClient, sink: EventSink, cursor: int,
                 log: FilteringBoundLogger, *, turnstile: Turnstile, batch_max_events: int = 200,
                 on_batch: OnBatch | None = None, stored_cursor: StoredCursor | None = None,
                 seed: Seed | None = None) -> None:
        self.session_id = session_id
        self.cursor = cursor
        self.lock = asyncio.Lock()
        self.state = LegacyTurnState()
        self.turnstile = turnstile  # bounds the CPU work of a read per loop turn (bridge.perf.turnstile)
        self._client = client
        self._sink = sink
        self._log = log
        self._batch_max = batch_max_events
        self._on_batch = on_batch
        # What the database holds now (lost commits, docs/scaling.md "Failover"), and the stored rows the
        # legacy turn state is rebuilt from after a rewind.
        self._stored_cursor = stored_cursor
        self._seed = seed
        # The last repair read the log whole: every event of this session it held is stored, no hole, no
        # reject, so the cursor is the log's end as of that read (catch-up then needs no `/history`).
        self.log_read_whole = False
        # Exact twins of `/global/event` waiting above a hole, by seq (owned by the session's SyncRepair).
        self.waiting_twins: Mapping[int, Envelope] = {}
        # Takes durable events above a hole `/global/event` has not shown yet, to wait with the twins; False:
        # the hole is not one to wait for (the session's SyncRepair sets it).
        self.hold_ahead: Callable[[list[Envelope]], bool] | None = None

    async def seed_state(self) -> None:
        """The legacy turn state rebuilt from the stored rows (at start, and after a rewind)."""
        if self._seed is not None:
            self.state = LegacyTurnState.from_rows(await self._seed())

    def map(self, env: Envelope) -> ChatEvent:
        """Normalize one event of this session (legacy types through the session's turn state); feed
        events in seq order, each once (a repeat maps to the same kind)."""
        return normalize_legacy(env, self.state)

    async def accept_frame(self, data: str, received_at: datetime) -> ChatEvent | None:
        """One frame of the durable stream as an event of this session, or None (rejected and kept)."""
        try:
            env = parse_frame(data)
        except BadFrame as e:
            await self.reject(e.reason, data, received_at, None, str(e))
            return None
        r = check(self.map(env), self.session_id, lambda: data, self._log)
        if isinstance(r, Rejected):
            await self.reject_item(r, received_at)
            return None
        return r

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None, detail: str) -> None:
        metrics.REJECTS.labels(reason=reason).inc()
        self._log.error("frame_rejected", reason=reason, seq=seq, detail=detail[:300])
        await self._sink.reject(reason, raw, received_at, seq)

    async def reject_item(self, r: Rejected, received_at: datetime) -> None:
        await self.reject(r.reason, r.raw, received_at, r.seq, r.detail)

    # -- writes -----------------------------------------------------------------------------------------
    async def write(self, events: Sequence[ChatEvent], received_at: datetime, source: str) -> None:
        """Store a batch of the durable stream or `/history`, repairing first if it starts above the
        cursor + 1 — unless the seqs it skips are ones `/global/event` has not shown yet (it runs behind the
        durable stream under load): the batch's events then wait with the twins for the hole to fill
        (`hold_ahead`, bridge.upstream.repair; docs/mirror.md "A repair only for a real hole")."""
        async with self.lock:
            fresh = [e for e in events if e.seq is not None and e.seq > self.cursor]
            if fresh and contiguous_run(self.cursor, [e.envelope for e in fresh]).missing_from is not None:
                fresh = self._with_waiting_twins(fresh)
            run = contiguous_run(self.cursor, [e.envelope for e in fresh]) if fresh else None
            if run is not None and run.missing_from is not None and source == "stream" \
                    and self.hold_ahead is not None:
                now = {e.seq for e in run.events}
                ahead = [e for e in fresh if e.seq not in now]
                if self.hold_ahead([e.envelope for e in ahead]):
                    metrics.DURABLE_HELD.inc(len(ahead))
                    fresh = [e for e in fresh if e.seq in now]
                    run = None
            if run is not None and run.missing_from is not None:
                await self.repair_locked(f"{source}_ahead")
                skipped = sum(1 for e in fresh if e.seq is not None and e.seq <= self.cursor)
                if skipped:
                    metrics.EVENTS_DUPLICATE.inc(skipped)
                fresh = [e for e in fresh if e.seq is not None and e.seq > self.cursor]
            await self.commit(fresh, received_at, source)

    def _with_waiting_twins(self, fresh: list[ChatEvent]) -> list[ChatEvent]:
        """`fresh` with the exact twins waiting in the holes between its seqs (bridge.upstream.repair holds
        them for the durable stream), in seq order: a durable batch that arrives after the legacy twins
        between its events needs no repair (docs/mirror.md rule 3)."""
        have = {e.seq for e in fresh}
        top = max(s for s in have if s is not None)
        fill = sorted(s for s in self.waiting_twins if self.cursor < s < top and s not in have)
        if not fill:
            return fresh
        merged = fresh + [self.map(self.waiting_twins[s]) for s in fill]
        merged.sort(key=lambda e: e.seq or 0)
        return merged

    async def commit(self, events: list[ChatEvent], received_at: datetime, source: str) -> None:
        """Store events in order (the caller holds `lock`); batches of `batch_max_events`. A batch the
        database refuses as behind (lost commits) rewinds the cursor and repairs from the sync log first;
        what the log did not cover is then written."""
        pending = events
        while pending:
            batch, pending = pending[: self._batch_max], pending[self._batch_max :]
            t0 = time.perf_counter()
            try:
                self.cursor = await self._sink.write(batch, received_at)
            except CursorBehind as e:
                await self._rewind(e.stored, "write")
                await self.repair_locked("cursor_behind")
                pending = [ev for ev in batch + pending if ev.seq is not None and ev.seq > self.cursor]
                continue
            self._client.note_size(self.session_id, self.cursor)  # named in every later sync-log body
            metrics.COMMIT_SECONDS.observe(time.perf_counter() - t0)
            metrics.BATCH_SIZE.observe(len(batch))
            now_ms = time.time() * 1000
            observe = metrics.UPSTREAM_TO_COMMIT.observe
            for ev in batch:
                if ev.timestamp_ms is not None:
                    observe(max(0.0, (now_ms - ev.timestamp_ms) / 1000))
            for kind, n in Counter(ev.kind for ev in batch).items():  # one labelled increment per kind
                metrics.EVENTS_INGESTED.labels(kind=kind, source=source).inc(n)
            self._log.debug("batch_committed", events=len(batch), cursor_seq=self.cursor, source=source)
            if self._on_batch is not None:
                self._on_batch(batch)

    # -- lost commits (failover) --------------------------------------------------------------------------
    async def reload_cursor(self) -> None:
        """The stored cursor, if below ours, becomes ours (the caller holds `lock`; a repair follows)."""
        if self._stored_cursor is None:
            return
        stored = await self._stored_cursor()
        if stored is None:
            # The session's row itself was lost (claimed after the standby's last WAL): end this follower;
            # its owner claims the session again (a transient failure) and catches up from the log.
            metrics.CURSOR_REWINDS.labels(cause="reconnect").inc()
            self._log.warning("session_row_lost", cursor_seq=self.cursor)
            raise CursorBehind(self.session_id, self.cursor, -1)
        if stored < self.cursor:
            await self._rewind(stored, "reconnect")
        elif stored == 0 == self.cursor:
            # A stored cursor of 0 says nothing of seq 0 (nothing stored, or seq 0 only: docs/mirror.md "Seq 0"),
            # so a lost seq 0 would go unseen: read from the start again (a seq 0 still stored is a benign duplicate).
            self.cursor = FROM_START

    async def _rewind(self, stored: int, cause: str) -> None:
        """The database lost our commits after `stored`: continue from there, the legacy turn state
        rebuilt from what is stored; the sync log gives the lost events again, same seqs and ids. From the
        start when the stored cursor is 0: seq 0 may be lost too (docs/mirror.md "Seq 0")."""
        metrics.CURSOR_REWINDS.labels(cause=cause).inc()
        self._log.warning("cursor_behind_database", cursor_seq=self.cursor, stored_cursor=stored, cause=cause)
        self.cursor = stored if stored > 0 else FROM_START
        await self.seed_state()

    # -- the sync-log repair ------------------------------------------------------------------------------
    async def repair_locked(self, cause: str) -> int:
        """Read the sync log after the cursor and store it (the caller holds `lock`); returns the number
        of events stored, or -1 when the log is over the client's body bound and was not read: the
        caller's events are then stored with a hole, which is recorded as a gap (docs/mirror.md)."""
        cursor = self.cursor
        self.log_read_whole = False
        metrics.SYNC_REPAIRS.labels(cause=cause).inc()
        try:
            items = await self._client.sync_history(self.session_id, cursor)
        except BodyTooLarge as e:
            metrics.REJECTS.labels(reason="sync_log_too_large").inc()
            self._log.error("sync_log_too_large", cursor_seq=cursor, error=str(e))
            return -1
        received_at = datetime.now(UTC)
        envs, rejected = await self._accepted(items, cursor, received_at)
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
        await self.commit(events, received_at, "sync")
        top = max((e.seq for e in envs if e.seq is not None), default=cursor)
        self.log_read_whole = not rejected and run.missing_from is None and self.cursor >= top
        return len(events)

    async def _accepted(self, items: list[object], cursor: int,
                        received_at: datetime) -> tuple[list[Envelope], int]:
        """The log's events of this session above `cursor`, once each, in seq order; bad ones rejected
        (how many is the second value)."""
        by_seq: dict[int, Envelope] = {}
        rejected = 0
        for i, item in enumerate(items):
            if i % 200 == 0:  # a whole log is parsed here: bounded per loop turn
                await self.turnstile.enter()
            try:
                env = parse_sync_item(item)
            except BadFrame as e:
                await self.reject(e.reason, json_text(item), received_at, None, str(e))
                rejected += 1
                continue
            if env.aggregate_id != self.session_id:
                continue  # the log of an aggregate the request could not leave out (§14): not ours
            if env.seq is not None and env.seq > cursor:
                by_seq.setdefault(env.seq, env)
        return [by_seq[s] for s in sorted(by_seq)], rejected
