"""The health task: the only sender of `WATCHDOG=1`.

Each tick sleeps one interval and measures how late it woke up (event-loop lag). The watchdog is fed
only when the loop is not blocked, the database answers and the followers' supervisor is alive, so
systemd restarts a bridge that is wedged rather than one that merely still has a pid. When the loop is
blocked no tick runs at all, so no ping can be sent on its behalf either. `STATUS=` gets a one-line
summary on every tick.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from bridge import metrics
from bridge.ops.sdnotify import Notifier

DatabaseProbe = Callable[[], Awaitable[None]]  # raises when the database does not answer


@dataclass(frozen=True)
class HealthVerdict:
    healthy: bool
    loop_lag_s: float
    reasons: tuple[str, ...] = ()


def judge(
    loop_lag_s: float, max_loop_lag_s: float, database_error: str | None, supervisor_alive: bool
) -> HealthVerdict:
    """Pure: the verdict of one tick."""
    reasons: list[str] = []
    if loop_lag_s > max_loop_lag_s:
        reasons.append(f"event loop blocked for {loop_lag_s:.3f} s (limit {max_loop_lag_s:.3f} s)")
    if database_error is not None:
        reasons.append(f"database: {database_error}")
    if not supervisor_alive:
        reasons.append("followers' supervisor is not running")
    return HealthVerdict(healthy=not reasons, loop_lag_s=loop_lag_s, reasons=tuple(reasons))


@dataclass(frozen=True)
class HealthTimes:
    """How often the watchdog ticks, how late a tick may come, how long the database probe may take."""

    interval_s: float = 5.0
    max_loop_lag_s: float = 1.0
    probe_timeout_s: float = 5.0


class HealthMonitor:
    def __init__(
        self,
        notifier: Notifier,
        *,
        database_probe: DatabaseProbe,
        supervisor_alive: Callable[[], bool],
        status_line: Callable[[], str],
        times: HealthTimes = HealthTimes(),
        clock: Callable[[], float] = time.monotonic,
        on_verdict: Callable[[HealthVerdict], None] | None = None,
    ) -> None:
        self._notifier = notifier
        self._probe = database_probe
        self._supervisor_alive = supervisor_alive
        self._status_line = status_line
        self.interval_s = times.interval_s
        self.max_loop_lag_s = times.max_loop_lag_s
        self._probe_timeout_s = times.probe_timeout_s
        self._clock = clock
        self._on_verdict = on_verdict
        self.last: HealthVerdict | None = None
        self._last_status = ""
        self._log = structlog.get_logger("bridge.health")

    async def run(self) -> None:
        while True:
            await self.tick()

    async def tick(self) -> HealthVerdict:
        due = self._clock() + self.interval_s
        await asyncio.sleep(self.interval_s)
        lag = max(0.0, self._clock() - due)
        metrics.EVENT_LOOP_LAG.set(lag)
        verdict = judge(lag, self.max_loop_lag_s, await self._database_error(), self._supervisor_alive())
        if verdict.healthy:
            self._notifier.watchdog()
        else:
            metrics.HEALTH_CHECKS_FAILED.inc()
            if self.last is None or self.last.reasons != verdict.reasons:
                self._log.warning("watchdog_withheld", reasons=list(verdict.reasons))
        status = self._status_line() if verdict.healthy else "unhealthy: " + "; ".join(verdict.reasons)
        if status != self._last_status:  # STATUS= only when it changes
            self._notifier.status(status)
            self._last_status = status
        self.last = verdict
        if self._on_verdict is not None:
            self._on_verdict(verdict)
        return verdict

    async def _database_error(self) -> str | None:
        try:
            async with asyncio.timeout(self._probe_timeout_s):
                await self._probe()
        except TimeoutError:
            return f"no answer within {self._probe_timeout_s:g} s"
        except Exception as e:  # any driver error means "does not answer"
            return f"{type(e).__name__}: {e}"[:200]
        return None
