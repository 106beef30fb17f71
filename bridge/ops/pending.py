"""Operators and the requests the agent waits for (docs/operations.md, "Pending requests"): the gauges
`bridge_pending_requests{kind}` and `bridge_pending_request_oldest_seconds{kind}` (the alert
`BridgePendingRequestOld` reads the latter), refreshed from the pending-requests table; and the `doctor`
check that lists them. `summarize` and `pending_check` are pure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import structlog

from bridge import metrics
from bridge.store.ports import PendingRequestsPort, StoredRequest

KINDS = ("permission", "question")
REFRESH_S = 15.0
SHOWN = 10  # requests listed by doctor


def summarize(rows: Iterable[StoredRequest], now: datetime) -> dict[str, tuple[int, float]]:
    """kind -> (how many pending, age in seconds of the oldest; 0 when none), for every kind."""
    out = {k: (0, 0.0) for k in KINDS}
    for r in rows:
        count, oldest = out.get(r.kind, (0, 0.0))
        age = max(0.0, (now - r.asked_at).total_seconds()) if r.asked_at is not None else 0.0
        out[r.kind] = (count + 1, max(oldest, age))
    return out


def _age(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60 \
        else f"{seconds:.0f} s"


def pending_lines(rows: list[StoredRequest], now: datetime) -> list[str]:
    return [f"{r.kind} {r.request_id} of {r.session_id} ({r.runtime}), pending "
            f"{_age((now - r.asked_at).total_seconds()) if r.asked_at else 'since an unknown time'}"
            for r in rows[:SHOWN]]


class PendingGauges:
    """Refreshes the gauges every `REFRESH_S` (every process: each reports the one table)."""

    def __init__(self, store: PendingRequestsPort, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._store = store
        self._clock = clock
        self._log = structlog.get_logger("bridge.ops").bind(upstream=store.upstream)

    async def refresh(self) -> None:
        for kind, (count, oldest) in summarize(await self._store.pending(), self._clock()).items():
            metrics.PENDING_REQUESTS.labels(kind=kind).set(count)
            metrics.PENDING_OLDEST_SECONDS.labels(kind=kind).set(oldest)

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as e:  # the database is away: the next tick tries again
                self._log.warning("pending_gauges_failed", error=f"{type(e).__name__}: {e}")
            await asyncio.sleep(REFRESH_S)
