"""The one global live reader per upstream: `GET /global/event` (docs/upstream.md §15).

One stream for every directory and both runtimes; it stayed open through legacy turns where `/api/event`
closed (§5). Every persisted event comes twice, as a bus event and as its sync twin with the sync log's seq;
deltas, statuses and permissions only as bus events. It is live only: what is sent while we are away is
gone, so after every (re)connect the handler re-syncs (each warm session repairs from its sync log,
discovery runs). We reconnect at once after a clean EOF, and when no byte (not even the `server.heartbeat`
event) arrived within `heartbeat_timeout_s`.

Each frame becomes one `ChatEvent` for the handler, with the frame's directory (a v2 bus event's envelope
`raw` is rewritten to the live shape `{id, type, data, location}` that the relay stores): a twin is normalized
without state (the follower maps what it stores itself, bridge.events.legacy); a bus event of a session through a
per-session `LegacyTurnState` of this reader, so a legacy `message.part.delta` of a part announced as text
or reasoning is a `delta:text` / `delta:reasoning` like a v2 delta (docs/legacy.md).

An event naming a session id that does not have the upstream's id shape is dropped here (counted as
`bridge_rejects_total{reason="live_bad_session_id"}`), so no handler warms or routes it.

A handler that says which sessions it has no use for (`live_skip_reason`: a peer holds it, and no subscriber
here watches it) has their frames dropped before they are decoded, counted once per loop turn as
`bridge_live_frames_skipped_total{reason}` — only the kinds whose every effect needs the session followed or
watched here (bridge.events.global_peek.session_of; docs/operations.md "Workers").
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import BadFrame, UpstreamError
from bridge.events import ChatEvent, Kind, normalize
from bridge.events.global_peek import SKIP, DurableTwin, peek, session_of
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LEGACY_TYPES, LegacyTurnState
from bridge.events.syncframes import GlobalFrame, parse_global_frame
from bridge.ids import valid_session_id
from bridge.outage import OutageLog
from bridge.perf.metric_batch import TALLY
from bridge.upstream.client import UpstreamClient
from bridge.upstream.sse import FrameTooLarge, SSEComment, SSEEvent, SSEParser

# Sessions whose live legacy mapping state is kept (least recently used beyond this are forgotten: their
# next delta before a part update maps to `legacy:part-delta`, which the relay passes on as well).
LIVE_STATES_MAX = 1024


class LiveHandler(Protocol):
    async def on_live_connected(self) -> None: ...

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None: ...


class LiveStream:
    HEALTHY_AFTER_S = 1.0  # a connection that lasted this long ended "normally"

    def __init__(
        self,
        client: UpstreamClient,
        handler: LiveHandler,
        *,
        heartbeat_timeout_s: float = 45.0,
        reconnect_min_s: float = 0.2,
        reconnect_max_s: float = 5.0,
        upstream: str = "",
    ) -> None:
        self._client = client
        self._handler = handler
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._backoff = Backoff(reconnect_min_s, reconnect_max_s)
        self._log = structlog.get_logger("bridge.live").bind(upstream=upstream)
        self.connected = asyncio.Event()
        self.connections = 0  # successful connects so far (tests and /readyz read it)
        # An unreachable upstream is logged when lost, as a slow reminder, and when back (/readyz shows it).
        self.outage = OutageLog(self._log, "upstream_live")
        self._states: OrderedDict[str, LegacyTurnState] = OrderedDict()
        # A handler that takes v2 twins without their payload lets the reader skip decoding them and the
        # bus copies of persisted v2 events (bridge.events.global_peek); others get every frame decoded.
        self._on_durable_twin: Callable[[DurableTwin], Awaitable[None]] | None = getattr(
            handler, "on_durable_twin", None)
        # A handler that names the sessions it has no use for lets the reader drop their frames undecoded.
        self._skip_reason: Callable[[str], str | None] | None = getattr(handler, "live_skip_reason", None)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            cause = "eof"
            started = loop.time()
            try:
                await self._read_once()
            except TimeoutError:
                cause = "heartbeat_timeout"
                self._log.warning("live_stream_silent", timeout_s=self._heartbeat_timeout_s)
            except FrameTooLarge as e:
                cause = "frame_too_large"
                self._log.error("live_frame_too_large", error=str(e))
            except UpstreamError as e:
                cause = "error"
                self.outage.failed(str(e))
            finally:
                self.connected.clear()
            metrics.UPSTREAM_RECONNECTS.labels(stream="live", cause=cause).inc()
            # A clean EOF after a connection that lived a while is the legacy-prompt close (§5): every
            # moment away loses events, so reconnect at once. Anything else, or a server that keeps
            # closing right away, backs off.
            if cause == "eof" and loop.time() - started >= self.HEALTHY_AFTER_S:
                self._backoff.reset()
                delay = 0.0
            else:
                delay = self._backoff.next_delay()
            await asyncio.sleep(delay)

    async def _read_once(self) -> None:
        async with asyncio.timeout(self._heartbeat_timeout_s) as t:
            async with self._client.open_global_events() as body:
                self.connected.set()
                self.connections += 1
                self.outage.succeeded()
                self._log.info("live_stream_connected")
                await self._handler.on_live_connected()
                parser = SSEParser()
                loop = asyncio.get_running_loop()
                async for chunk in body:
                    t.reschedule(loop.time() + self._heartbeat_timeout_s)
                    for item in parser.feed(chunk):
                        if isinstance(item, SSEComment):
                            continue
                        await self._dispatch(item)
                self._log.info("live_stream_ended")

    @staticmethod
    def _peek_counted(what: str) -> None:
        # Counted once per loop turn (bridge.perf.metric_batch): a counter's inc per frame costs more than the
        # look itself in prometheus_client's multiprocess mode, which workers use.
        TALLY.count(metrics.LIVE_FRAMES_PEEKED, (what,))

    def _unneeded(self, session_id: str | None) -> bool:
        """True for a frame of a session the handler has no use for: dropped (counted), not decoded."""
        if session_id is None or self._skip_reason is None or not valid_session_id(session_id):
            return False
        reason = self._skip_reason(session_id)
        if reason is None:
            return False
        TALLY.count(metrics.LIVE_FRAMES_SKIPPED, (reason,))
        return True

    async def _dispatch(self, item: SSEEvent) -> None:
        if self._on_durable_twin is not None:  # each event parsed once (bridge.events.global_peek)
            looked = peek(item.data)
            if looked == SKIP:
                self._peek_counted("bus_copy_skipped")
                return
            if isinstance(looked, DurableTwin) and valid_session_id(looked.session_id):
                if self._unneeded(looked.session_id):
                    return
                self._peek_counted("durable_twin")
                try:
                    await self._on_durable_twin(looked)
                except Exception as e:  # as below: a handler bug must not take the global stream down
                    self._log.error("live_handler_failed", type=looked.type, error=f"{type(e).__name__}: {e}",
                                    exc_info=True)
                return
            if looked is None and self._unneeded(session_of(item.data)):
                return
        elif self._skip_reason is not None and self._unneeded(session_of(item.data)):
            return
        try:
            frame = parse_global_frame(item.data)
        except BadFrame as e:
            metrics.REJECTS.labels(reason=f"live_{e.reason}").inc()
            self._log.warning("live_frame_rejected", reason=e.reason, detail=e.detail[:300])
            return
        ev = self._map(frame)
        if ev.kind in (Kind.NOISE, Kind.SERVER_HEARTBEAT, Kind.SERVER_CONNECTED):
            return
        if ev.session_id is not None and not valid_session_id(ev.session_id):
            metrics.REJECTS.labels(reason="live_bad_session_id").inc()
            self._log.warning("live_frame_rejected", reason="bad_session_id", type=ev.type,
                              session_id=repr(ev.session_id[:80]))
            return
        if ev.kind == Kind.UNKNOWN:
            metrics.UNKNOWN_EVENTS.labels(stream="live").inc()
        try:
            await self._handler.on_live_event(ev, frame.directory)
        except Exception as e:  # a handler bug must not take the global stream down
            self._log.error("live_handler_failed", type=ev.type, error=f"{type(e).__name__}: {e}", exc_info=True)

    def _map(self, frame: GlobalFrame) -> ChatEvent:
        env = frame.envelope
        if not frame.twin and env.type not in LEGACY_TYPES:
            # A v2 bus event is handed on in the live envelope shape the relay stores and replays
            # (`{id, type, data, location}`, docs/upstream.md §2); a legacy one stays the bus event
            # `{id, type, properties}` (how a legacy permission record is kept, docs/legacy.md).
            where = {"location": {"directory": frame.directory}} if frame.directory else {}
            env = replace(env, raw={"id": env.id, "type": env.type, "data": env.data, **where})
        sid = env.session_id
        if frame.twin or sid is None:
            return normalize(env) if frame.twin else normalize_legacy(env, LegacyTurnState())
        state = self._states.pop(sid, None) or LegacyTurnState()
        self._states[sid] = state  # most recently used last
        while len(self._states) > LIVE_STATES_MAX:
            self._states.popitem(last=False)
        return normalize_legacy(env, state)
