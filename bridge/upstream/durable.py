"""One session's durable follower: sync-log and `/history` catch-up, then `/event?after=<cursor>` forever.

Traps handled (docs/upstream.md):
- §3.3 no headers until the first event → no header/read timeout; only the connect phase is timed.
- §3.4 no keepalive, never ends → TCP keepalive on the socket; a *stall* watchdog restarts the stream
  when `/global/event` announced a v2 seq we have not received within `durable_stall_s`, unless the
  process's governor sees every stream served that late (bridge.upstream.stall_policy).
- §3.1 seq gaps (legacy turns) → the durable stream is only the v2 subset of the session's sync log (§14):
  a batch starting above cursor + 1 is repaired from the log first (`bridge.upstream.ingest`, one cursor
  for both sources, docs/mirror.md), and every (re)connect starts with a repair.
- §3.2 `after` is exclusive → resume with `after=<stored cursor>`.
- §7 upstream restart drops the connection mid-body → reconnect with capped backoff + jitter.
- the database lost our newest commits (a failover to a lagging standby) → a write refused as
  `CursorBehind`, or the stored cursor checked after the database came back (`database_back`): rewind to
  the stored cursor and repair from the sync log (bridge.upstream.ingest; docs/mirror.md rule 7,
  docs/scaling.md "Failover").

The follower owns the session's `SessionIngest` (cursor, lock, commit, reject, repair) and feeds it: the
durable stream here, `/history` pages (`HistoryCatchUp`), the live twins and repair requests (`SyncRepair`).
It never writes the cursor itself.

`/history` is paged one page ahead of the writes (bridge.upstream.catchup). What retrying cannot fix
stops the follower with `STUCK` instead of looping: a `/history` page over the client's body bound even
one event at a time, or pages whose every event is rejected `max_stuck_passes` times in a row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import (
    InvalidRequest,
    InvalidSessionId,
    LeaseLost,
    SessionNotFound,
    UpstreamError,
    UpstreamUnavailable,
)
from bridge.events import ChatEvent, Envelope
from bridge.perf.turnstile import Turnstile
from bridge.upstream.catchup import HistoryCatchUp
from bridge.upstream.client import FROM_START, UpstreamClient
from bridge.upstream.early_twins import EarlyTwins
from bridge.upstream.follower import EventSink, FollowerExit
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from bridge.upstream.ingest import IngestParts, SessionIngest
from bridge.upstream.repair import RepairTimes, SyncRepair
from bridge.upstream.sse import FrameTooLarge, SSEComment, SSEParser
from bridge.upstream.stall import StallWatch
from bridge.upstream.twin_shelf import TwinShelf

_DEFAULTS, _NO_HOOKS = FollowerSettings(), FollowerHooks()  # frozen


class DurableFollower:
    def __init__(self, session_id: str, client: UpstreamClient, sink: EventSink, cursor: int,
                 settings: FollowerSettings = _DEFAULTS, hooks: FollowerHooks = _NO_HOOKS,
                 early: EarlyTwins | None = None) -> None:
        self.session_id = session_id
        self._client = client
        s = settings
        self._backoff = (Backoff(s.reconnect_min_s, s.reconnect_max_s, hooks.rand) if hooks.rand
                         else Backoff(s.reconnect_min_s, s.reconnect_max_s))
        self._on_committed = hooks.on_committed
        self._max_stuck = s.max_stuck_passes
        self._stuck_passes = 0
        self._log = structlog.get_logger("bridge.durable").bind(upstream=s.upstream, session_id=session_id)
        self.connected = asyncio.Event()  # set while the stream is open with headers received
        # Every write goes through the session's ingest: one cursor for the durable stream, the sync log
        # and the live twins (docs/mirror.md). A stored cursor of 0 may mean "nothing stored": start before
        # seq 0 so `session.created` (seq 0) is read too; if it was stored already, reading it again is a
        # benign duplicate (docs/mirror.md).
        shelf = TwinShelf()
        self.ingest = SessionIngest(session_id, client, sink, cursor if cursor > 0 else FROM_START, self._log,
                                    IngestParts(hooks.turnstile or Turnstile(), s.batch_max_events,
                                                self._committed, hooks.stored_cursor, hooks.seed, shelf))
        self._stall = StallWatch(self.ingest, s.stall_s, hooks.stall_governor)
        self.sync = SyncRepair(self.ingest, shelf, self._log,
                               RepairTimes(s.repair_debounce_s, s.reconnect_max_s, s.twin_hold_s),
                               self._stall.backlog)
        self.history = HistoryCatchUp(self.ingest, client, self._log, page_size=s.history_page,
                                      prefetch=s.history_prefetch)
        self._fatal: BaseException | None = None  # the inbox task's error, re-raised by the main loop
        # What /global/event showed while the session was claimed: if it covers the cursor, the first
        # catch-up reads nothing (bridge.upstream.early_twins; docs/mirror.md "A repair only for a real hole").
        self._early = early
        self._covered = False

    @property
    def cursor(self) -> int:
        """The highest seq such that every seq up to it is stored (the session's ingest owns it)."""
        return self.ingest.cursor

    # -- hints from the live stream -------------------------------------------------------------
    def notify_seen(self, seq: int) -> None:
        """/global/event showed this v2 seq; if it does not arrive soon, the stream is stuck (and twins
        after it wait for it instead of asking the sync log)."""
        self._stall.seen(seq)
        self.sync.announce(seq)

    def offer_twin(self, env: Envelope) -> None:
        """An exact sync twin of `/global/event` (a legacy event, docs/upstream.md §15): stored directly
        when it is next in line, else it pokes a repair."""
        self.sync.offer(env)

    def request_repair(self, cause: str) -> None:
        """Read the sync log from the cursor soon (after a live reconnect: what was missed)."""
        self.sync.request(cause)

    def database_back(self) -> None:
        """The database came back (it may be another server now, missing our newest commits): check the
        stored cursor, and re-read the sync log from it if it is behind ours (docs/scaling.md "Failover")."""
        self.sync.request_reload("database_back")

    @property
    def behind(self) -> bool:
        """It holds events above a hole or has a repair to run: not to be released idle (bridge.sessions.gc)."""
        return self.sync.behind

    def _take_early(self) -> None:
        early, self._early = self._early, None
        if early is None:
            return
        for env in early.exact.values():
            self.sync.offer(env)
        for seq in early.announced:
            self.notify_seen(seq)
        self._covered = early.covers(self.ingest.cursor)

    def _inbox_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._fatal = task.exception()
            self._stall.end_now()  # end the stream now; the main loop raises the error

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # -- main loop ------------------------------------------------------------------------------
    async def run(self) -> FollowerExit:
        self._log.info("follower_started", cursor_seq=self.cursor)
        await self.ingest.seed_state()
        self._take_early()
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
            if await self._stall.run(lambda: _stream(self._client, self.ingest, self.connected)):
                self._log.warning("durable_stream_stalled", cursor_seq=self.cursor, hint_seq=self._stall.hint_seq)
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
        """Repair from the sync log (everything missed, legacy included). When that read brought news and
        was whole (every event of the answer stored, no hole, no reject) the cursor is the log's end: the
        durable stream goes on from it (and answers a 404 itself), no `/history` page is asked. Otherwise
        page `/history` until the upstream says there is no more (over the body bound the sync log is not
        read and `/history` gives the v2 events, the rest becomes a recorded gap). Returns why the cursor
        cannot move, or None once caught up. A first catch-up whose cursor the live stream covers reads
        nothing: every seq above it comes as a twin or on the durable stream (`_take_early`)."""
        if self._covered:
            self._covered = False
            metrics.CATCHUPS_SKIPPED.inc()
            self._stuck_passes = 0
            return None
        whole = await self.ingest.catch_up("catch_up")  # nothing new: `/history` confirms the end
        stuck = None if whole else await self.history.run()
        if stuck is None:
            self._stuck_passes = 0
        return stuck

    def _committed(self, batch: Sequence[ChatEvent]) -> None:
        """After each stored batch: the upstream answers again, and the stall timer counts from now."""
        self._backoff.reset()
        if self._on_committed is not None:
            self._on_committed(batch)
        self._stall.arm(progress=True)
        self.sync.progressed()


async def _stream(client: UpstreamClient, ingest: SessionIngest, connected: asyncio.Event) -> None:
    """The session's durable stream from the ingest's cursor, until it ends; `connected` set once open."""
    async with client.open_session_events(ingest.session_id, ingest.cursor) as body:
        connected.set()
        parser = SSEParser()
        async for chunk in body:
            await ingest.pace()  # a burst of many sessions' reads: bounded per loop turn
            received_at = datetime.now(UTC)
            # The chunk's frames framed at once, parsed in one pass, written as one batch.
            events = await ingest.accept_frames([item.data for item in parser.feed(chunk)
                                                 if not isinstance(item, SSEComment)], received_at)
            if events:  # a read may end inside a frame: nothing to write yet
                await ingest.write(events, received_at, "stream")
        parser.close()  # a frame cut by EOF is discarded: it is replayed after reconnect
