"""SSE bodies → what the driver port yields (bridge.upstream.driver), for every generation: log reads,
change hints and live envelopes. A frame that cannot be parsed is kept in the log read (`LogRead.bad`), or
counted (`bridge_rejects_total{reason="live_…"}`) and logged on the hint and live streams — never fatal."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import structlog

from bridge import metrics
from bridge.errors import BadFrame, UpstreamUnavailable
from bridge.events.envelope import Envelope, parse_frame
from bridge.upstream.driver import Change, LogRead, Rejected
from bridge.upstream.sse import SSEEvent, SSEParser

T = TypeVar("T")
_log = structlog.get_logger("bridge.upstream")


async def log_reads(body: AsyncIterator[bytes], parse: Callable[[str], Envelope | None] = parse_frame,
                    ) -> AsyncIterator[LogRead]:
    """One `LogRead` per body chunk that completed a frame. `parse` returns None for a frame that is no
    event (2.x's `log.caught_up` marker)."""
    parser = SSEParser()
    async for chunk in body:
        envelopes: list[Envelope] = []
        bad: list[Rejected] = []
        for item in parser.feed(chunk):
            if not isinstance(item, SSEEvent):
                continue
            if item.event != "message":
                # 2.x ends a failing read with `event: effect/http-api/stream/failure` (docs/upstream.md
                # "OpenCode 2.x"): the read is over; the owner reconnects from its stored cursor.
                raise UpstreamUnavailable(f"log read failed upstream ({item.event}): {item.data[:300]}")
            try:
                env = parse(item.data)
            except BadFrame as e:
                bad.append(Rejected(e.reason, e.detail, item.data))
                continue
            if env is not None:
                envelopes.append(env)
        if envelopes or bad:
            yield LogRead(envelopes, bad)


async def parsed(body: AsyncIterator[bytes], parse: Callable[[str], T | None], stream: str) -> AsyncIterator[T]:
    """Every frame `parse` makes something of; a bad one is counted and logged, then skipped."""
    parser = SSEParser()
    async for chunk in body:
        for item in parser.feed(chunk):
            if not isinstance(item, SSEEvent):
                continue
            try:
                got = parse(item.data)
            except BadFrame as e:
                metrics.REJECTS.labels(reason=f"live_{e.reason}").inc()
                _log.warning("live_frame_rejected", stream=stream, reason=e.reason, detail=e.detail[:300])
                continue
            if got is not None:
                yield got


def hint(session_id: str | None, seq: int | None) -> Change | None:
    """A hint for a session's log, or None when either is missing (nothing to act on)."""
    if not isinstance(session_id, str) or not session_id or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    return Change("hint", session_id, seq)
