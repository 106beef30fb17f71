"""`PortFollower`: one session's durable log, read through the driver port (bridge.upstream.driver), into an
`EventSink`, exactly once — the follower of a serve whose log is gap-free per read and resumable by cursor
(OpenCode 2.x's `…/log?after=&follow=true`: docs/upstream.md "OpenCode 2.x", "Following a log"). The 1.x
serve keeps its own follower (bridge.upstream.durable: sync-log repair, `/history`, stall watchdog), which
its extra traps need.

Rules:
- it reads from the stored cursor (exclusive; 0 = from the start, as the 1.x follower reads it) and writes
  each read in one transaction: the sink advances the cursor with the rows (docs/mirror.md);
- an envelope at or below the cursor (a read that repeats after a reconnect) is skipped; seqs may jump
  (nothing assumes `cursor + 1`);
- a frame that cannot be parsed is kept with its reason (`sink.reject`), never fatal;
- any break — a dropped connection, a read that fails upstream, a refused write (`CursorBehind`: the
  database lost commits) — reconnects, with capped backoff, from the cursor the database holds;
- 404 → `GONE`, 400 on the cursor → `BAD_CURSOR`, fenced off → `LEASE_LOST`, `stop()` → `STOPPED`;
- `session.execution.*` tell the owner when a turn starts and ends (`on_turn`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import CursorBehind, InvalidRequest, LeaseLost, SessionNotFound, UpstreamError
from bridge.events import ChatEvent, Envelope
from bridge.events.gen2 import normalize_any, turn_signal
from bridge.upstream.driver import FROM_START, LogRead, UpstreamDriver
from bridge.upstream.follower import EventSink, FollowerExit


@dataclass(frozen=True)
class PortSettings:
    reconnect_min_s: float = 0.2
    reconnect_max_s: float = 5.0


@dataclass(frozen=True)
class PortHooks:
    """How a log's envelopes become events, and who hears of turns and stored batches."""

    normalize: Callable[[Envelope], ChatEvent] = normalize_any
    on_turn: Callable[[str, bool], None] | None = None
    on_committed: Callable[[Sequence[ChatEvent]], None] | None = None


class PortFollower:
    def __init__(self, driver: UpstreamDriver, session_id: str, sink: EventSink, cursor: int,
                 settings: PortSettings = PortSettings(), hooks: PortHooks = PortHooks()) -> None:
        self.driver = driver
        self.session_id = session_id
        self.sink = sink
        self.cursor = cursor
        self._normalize = hooks.normalize
        self._on_turn = hooks.on_turn
        self._on_committed = hooks.on_committed
        self._backoff = Backoff(settings.reconnect_min_s, settings.reconnect_max_s)
        self._stop = asyncio.Event()
        self.reconnects = 0
        self._log = structlog.get_logger("bridge.upstream").bind(session_id=session_id)

    def stop(self) -> None:
        self._stop.set()

    # What the 1.x follower's owner also tells it (bridge.sessions.supervisor); a log read from the stored
    # cursor needs none of it: a hint is a doorbell, there are no twins or sync-log repairs, and a write
    # the database refuses (`CursorBehind`) already rewinds to the stored cursor.
    @property
    def behind(self) -> bool:
        """Never holds events above a hole (each read resumes from the stored cursor): releasable."""
        return False

    def notify_seen(self, seq: int) -> None:
        return None

    def offer_twin(self, env: Envelope) -> None:
        return None

    def request_repair(self, cause: str) -> None:
        return None

    def database_back(self) -> None:
        return None

    async def run(self) -> FollowerExit:
        while not self._stop.is_set():
            cause = "error"
            try:
                await self._read_once()
            except SessionNotFound:
                return FollowerExit.GONE
            except InvalidRequest as e:
                self._log.error("follower_bad_cursor", cursor=self.cursor, error=str(e)[:300])
                return FollowerExit.BAD_CURSOR
            except LeaseLost:
                return FollowerExit.LEASE_LOST
            except CursorBehind as e:
                self._log.warning("follower_cursor_behind", believed=self.cursor, stored=e.stored)
                self.cursor, cause = e.stored, "cursor_behind"
            except UpstreamError as e:
                self._log.info("follower_reconnect", cursor=self.cursor, error=f"{type(e).__name__}: {e}"[:300])
            if self._stop.is_set():
                break
            self.reconnects += 1
            metrics.UPSTREAM_RECONNECTS.labels(stream="log", cause=cause).inc()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._backoff.next_delay())
        return FollowerExit.STOPPED

    async def _read_once(self) -> None:
        """One connection: read until it ends (an end is a break: the log never ends by itself)."""
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            # A stored cursor of 0 is also a new session's (the column's default, docs/mirror.md): read from
            # the start then, seq 0 (`session.created`) included; stored already, it is a duplicate.
            after = self.cursor if self.cursor > 0 else FROM_START
            async with self.driver.follow(self.session_id, after) as reads:
                iterator = aiter(reads)
                while not self._stop.is_set():
                    step = asyncio.ensure_future(anext(iterator))
                    await asyncio.wait({step, stop}, return_when=asyncio.FIRST_COMPLETED)
                    if not step.done():
                        step.cancel()
                        return
                    try:
                        read = step.result()
                    except StopAsyncIteration:
                        raise UpstreamError("the log read ended") from None
                    await self._write(read)
                    self._backoff.reset()
        finally:
            stop.cancel()

    async def _write(self, read: LogRead) -> None:
        now = datetime.now(UTC)
        for bad in read.bad:
            metrics.REJECTS.labels(reason=bad.reason).inc()
            await self.sink.reject(bad.reason, bad.raw, now)
        fresh: list[Envelope] = []
        floor = self.cursor if self.cursor > 0 else FROM_START
        for env in read.envelopes:
            if env.seq is None:
                metrics.REJECTS.labels(reason="no_seq").inc()
                await self.sink.reject("no_seq", str(env.raw)[:100_000], now)
            elif env.seq > max(floor, fresh[-1].seq if fresh and fresh[-1].seq is not None else FROM_START):
                fresh.append(env)
        if not fresh:
            return
        events = [self._normalize(e) for e in fresh]
        self.cursor = await self.sink.write(events, now)
        if self._on_committed is not None:
            self._on_committed(events)
        if self._on_turn is not None:
            for env in fresh:
                busy = turn_signal(env.type)
                if busy is not None:
                    self._on_turn(self.session_id, busy)
