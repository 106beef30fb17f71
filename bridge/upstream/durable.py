"""One session's durable follower: sync-log and `/history` catch-up, then `/event?after=<cursor>` forever.

Traps handled (docs/upstream.md):
- §3.3 no headers until the first event → no header/read timeout; only the connect phase is timed.
- §3.4 no keepalive, never ends → TCP keepalive on the socket; a *stall* watchdog restarts the stream
  when `/global/event` announced a v2 seq we have not received within `durable_stall_s`.
- §3.1 seq gaps (legacy turns) → the durable stream is only the v2 subset of the session's sync log (§14):
  a batch starting above cursor + 1 is repaired from the log first (`bridge.upstream.repair`, one cursor
  for both sources, docs/mirror.md), and every (re)connect starts with a repair.
- §3.2 `after` is exclusive → resume with `after=<stored cursor>`.
- §7 upstream restart drops the connection mid-body → reconnect with capped backoff + jitter.

The follower never writes the cursor itself: `EventSink.write()` stores rows and cursor in one
transaction (and raises `bridge.errors.LeaseLost` when the lease moved on), so the cursor never passes an
unstored event.

`/history` is paged one page ahead of the writes (bridge.upstream.catchup). What retrying cannot fix
stops the follower with `STUCK` instead of looping: a `/history` page over the client's body bound even
one event at a time, or pages whose every event is rejected `max_stuck_passes` times in a row.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from bridge import metrics, turnstile
from bridge.errors import (
    BadFrame,
    FrameTooLarge,
    InvalidRequest,
    InvalidSessionId,
    LeaseLost,
    SessionNotFound,
    UpstreamError,
    UpstreamUnavailable,
)
from bridge.events import ChatEvent, Envelope, parse_frame
from bridge.legacy import LegacyTurnState
from bridge.upstream.backoff import Backoff
from bridge.upstream.catchup import HistoryCatchUp, Rejected, check, parse_item
from bridge.upstream.client import FROM_START, UpstreamClient
from bridge.upstream.follower import EventSink, FollowerExit
from bridge.upstream.repair import SyncRepair
from bridge.upstream.sse import SSEComment, SSEParser


class DurableFollower:
    def __init__(
        self,
        session_id: str,
        client: UpstreamClient,
        sink: EventSink,
        cursor: int,
        *,
        batch_max_events: int = 200,
        reconnect_min_s: float = 0.2,
        reconnect_max_s: float = 5.0,
        stall_s: float = 10.0,
        history_page: int = 100,
        upstream: str = "",
        rand: Callable[[], float] | None = None,
        on_committed: Callable[[Sequence[ChatEvent]], None] | None = None,
        max_stuck_passes: int = 5,
        seed: Callable[[], Awaitable[Iterable[Mapping[str, Any]]]] | None = None,
        repair_debounce_s: float = 0.03,
        history_prefetch: bool = True,
    ) -> None:
        self.session_id = session_id
        # A stored cursor of 0 may mean "nothing stored": start before seq 0 so `session.created` (seq 0) is
        # read too; if it was stored already, reading it again is a benign duplicate (docs/mirror.md).
        self.cursor = cursor if cursor > 0 else FROM_START
        self._client = client
        self._sink = sink
        self._batch_max = batch_max_events
        self._backoff = (
            Backoff(reconnect_min_s, reconnect_max_s, rand) if rand else Backoff(reconnect_min_s, reconnect_max_s)
        )
        self._stall_s = stall_s
        self._on_committed = on_committed
        self._max_stuck = max_stuck_passes
        self._stuck_passes = 0
        self._log = structlog.get_logger("bridge.durable").bind(upstream=upstream, session_id=session_id)
        self._hint_seq = 0  # highest v2 seq announced by /global/event (its sync twins)
        self._timeout: asyncio.Timeout | None = None
        self.connected = asyncio.Event()  # set while the stream is open with headers received
        self.last_event_monotonic: float | None = None
        # Every write goes through the repair part: one cursor for the durable stream, the sync log and
        # the live twins (docs/mirror.md). `seed` gives the stored rows its legacy turn state starts from.
        self._seed = seed
        self.sync = SyncRepair(session_id, client, lambda: self.cursor, self._commit, self._reject, self._log,
                               debounce_s=repair_debounce_s, retry_s=reconnect_max_s)
        # `/history` pages one ahead of the writes (`history_prefetch=False`: one at a time, for comparison).
        self.history = HistoryCatchUp(
            session_id, client, lambda: self.cursor, log=self._log, page_size=history_page,
            prefetch=history_prefetch, parse=lambda item: parse_item(item, session_id, self.sync.map, self._log),
            write=lambda evs, at: self.sync.write(evs, at, "history"), reject=self._reject_item)
        self._fatal: BaseException | None = None  # the inbox task's error, re-raised by the main loop

    # -- hints from the live stream -------------------------------------------------------------
    def notify_seen(self, seq: int) -> None:
        """/global/event showed this v2 seq; if it does not arrive soon, the stream is stuck."""
        if seq <= self._hint_seq:
            return
        self._hint_seq = seq
        self._arm_stall_timer()

    def offer_twin(self, env: Envelope) -> None:
        """An exact sync twin of `/global/event` (a legacy event, docs/upstream.md §15): stored directly
        when it is next in line, else it pokes a repair."""
        self.sync.offer(env)

    def request_repair(self, cause: str) -> None:
        """Read the sync log from the cursor soon (after a live reconnect: what was missed)."""
        self.sync.request(cause)

    def _inbox_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._fatal = task.exception()
            t = self._timeout
            if t is not None:  # end the stream now; the main loop raises the error
                t.reschedule(asyncio.get_running_loop().time())

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def _arm_stall_timer(self, progress: bool = False) -> None:
        t = self._timeout
        if t is None:
            return
        if self._hint_seq > self.cursor:
            if t.when() is None or progress:
                t.reschedule(asyncio.get_running_loop().time() + self._stall_s)
        else:
            t.reschedule(None)

    # -- main loop ------------------------------------------------------------------------------
    async def run(self) -> FollowerExit:
        self._log.info("follower_started", cursor_seq=self.cursor)
        if self._seed is not None:
            self.sync.state = LegacyTurnState.from_rows(await self._seed())
        inbox = asyncio.create_task(self.sync.run(), name=f"sync-inbox:{self.session_id}")
        inbox.add_done_callback(self._inbox_done)
        try:
            return await self._run_loop()
        finally:
            inbox.cancel()

    async def _run_loop(self) -> FollowerExit:
        while True:
            try:
                outcome = await self._follow_once()
            except InvalidSessionId as e:
                metrics.REJECTS.labels(reason="bad_session_id").inc()
                self._log.error("session_id_refused", error=str(e))
                return FollowerExit.GONE
            except SessionNotFound:
                self._log.info("session_gone_upstream", cursor_seq=self.cursor)
                return FollowerExit.GONE
            except InvalidRequest as e:
                metrics.REJECTS.labels(reason="bad_cursor").inc()
                self._log.error("upstream_rejected_cursor", cursor_seq=self.cursor, error=str(e))
                return FollowerExit.BAD_CURSOR
            except LeaseLost:
                metrics.LEASE_LOSSES.inc()
                self._log.warning("lease_lost", cursor_seq=self.cursor)
                return FollowerExit.LEASE_LOST
            finally:
                self.connected.clear()
            if isinstance(outcome, FollowerExit):
                return outcome
            cause = outcome
            metrics.UPSTREAM_RECONNECTS.labels(stream="durable", cause=cause).inc()
            delay = self._backoff.next_delay()
            self._log.debug("durable_reconnect", delay_s=round(delay, 3), cause=cause)
            await asyncio.sleep(delay)

    async def _follow_once(self) -> str | FollowerExit:
        """Catch up, then stream until the stream ends; returns why it ended (a metric label), or `STUCK`.
        Errors that end the follower propagate, the inbox task's too."""
        self._raise_fatal()
        outcome = await self._follow_inner()
        self._raise_fatal()
        return outcome

    async def _follow_inner(self) -> str | FollowerExit:
        try:
            stuck = await self._catch_up()
            if stuck is not None:
                return self._no_progress(stuck)
            if await self._stream():
                self._log.warning("durable_stream_stalled", cursor_seq=self.cursor, hint_seq=self._hint_seq)
                return "stall"
            return "eof"
        except FrameTooLarge as e:
            # The next catch-up reads the same event from /history, which has no frame limit.
            metrics.REJECTS.labels(reason="frame_too_large").inc()
            self._log.error("durable_frame_too_large", cursor_seq=self.cursor, error=str(e))
            return "frame_too_large"
        except (SessionNotFound, InvalidRequest):
            raise
        except UpstreamUnavailable as e:
            self._log.warning("durable_stream_error", cursor_seq=self.cursor, error=str(e))
            return "unavailable"
        except UpstreamError as e:
            self._log.error("durable_stream_error", cursor_seq=self.cursor, error=str(e))
            return "error"

    def _no_progress(self, reason: str) -> str | FollowerExit:
        self._stuck_passes += 1
        metrics.FOLLOWERS_STUCK.labels(reason=reason).inc()
        self._log.error("durable_no_progress", reason=reason, cursor_seq=self.cursor, passes=self._stuck_passes)
        if self._stuck_passes >= self._max_stuck:
            self._log.error("follower_stuck", reason=reason, cursor_seq=self.cursor)
            return FollowerExit.STUCK
        return reason

    async def _catch_up(self) -> str | None:
        """Repair from the sync log (everything missed, legacy included), then page `/history` until the
        upstream says there is no more (it also detects a 404; over the body bound the sync log is not read
        and `/history` gives the v2 events, the rest becomes a recorded gap). Returns why the cursor
        cannot move, or None once caught up."""
        async with self.sync.lock:
            await self.sync.repair_locked("catch_up")
        stuck = await self.history.run()
        if stuck is None:
            self._stuck_passes = 0
        return stuck

    async def _stream(self) -> bool:
        """Read the durable stream until it ends; True if the stall timer ended it."""
        try:
            async with asyncio.timeout(None) as t:
                self._timeout = t
                self._arm_stall_timer()
                await self._stream_inner()
        except TimeoutError:
            # Only the stall timer can expire here: the stream itself has no timeout (§3.3/§3.4).
            return True
        finally:
            self._timeout = None
        return False

    async def _stream_inner(self) -> None:
        async with self._client.open_session_events(self.session_id, self.cursor) as body:
            self.connected.set()
            parser = SSEParser()
            async for chunk in body:
                await turnstile.for_loop().enter()  # a burst of many sessions' reads: bounded per loop turn
                received_at = datetime.now(UTC)
                events: list[ChatEvent] = []
                for item in parser.feed(chunk):
                    if isinstance(item, SSEComment):
                        continue
                    ev = await self._accept_text(item.data, received_at)
                    if ev is not None:
                        events.append(ev)
                await self.sync.write(events, received_at, "stream")
            parser.close()  # a frame cut by EOF is discarded: it is replayed after reconnect

    # -- frames → events --------------------------------------------------------------------------
    async def _accept_text(self, data: str, received_at: datetime) -> ChatEvent | None:
        try:
            env = parse_frame(data)
        except BadFrame as e:
            await self._reject(e.reason, data, received_at, None, str(e))
            return None
        r = check(self.sync.map(env), self.session_id, lambda: data, self._log)
        if isinstance(r, Rejected):
            await self._reject(r.reason, r.raw, received_at, r.seq, r.detail)
            return None
        return r

    async def _reject_item(self, r: Rejected, received_at: datetime) -> None:
        await self._reject(r.reason, r.raw, received_at, r.seq, r.detail)

    async def _reject(self, reason: str, raw: str, received_at: datetime, seq: int | None, detail: str) -> None:
        metrics.REJECTS.labels(reason=reason).inc()
        self._log.error("frame_rejected", reason=reason, seq=seq, detail=detail[:300])
        await self._sink.reject(reason, raw, received_at, seq)

    async def _commit(self, events: list[ChatEvent], received_at: datetime, source: str) -> None:
        """Store events in order (the caller holds the repair lock); batches of `batch_max_events`."""
        for i in range(0, len(events), self._batch_max):
            batch = events[i : i + self._batch_max]
            t0 = time.perf_counter()
            self.cursor = await self._sink.write(batch, received_at)
            metrics.COMMIT_SECONDS.observe(time.perf_counter() - t0)
            metrics.BATCH_SIZE.observe(len(batch))
            now_ms = time.time() * 1000
            observe = metrics.UPSTREAM_TO_COMMIT.observe
            for ev in batch:
                if ev.timestamp_ms is not None:
                    observe(max(0.0, (now_ms - ev.timestamp_ms) / 1000))
            for kind, n in Counter(ev.kind for ev in batch).items():  # one labelled increment per kind
                metrics.EVENTS_INGESTED.labels(kind=kind, source=source).inc(n)
            self.last_event_monotonic = time.monotonic()
            self._backoff.reset()
            self._log.debug("batch_committed", events=len(batch), cursor_seq=self.cursor, source=source)
            if self._on_committed is not None:
                self._on_committed(batch)
        if events:
            self._arm_stall_timer(progress=True)
