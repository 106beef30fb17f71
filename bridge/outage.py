"""Quiet when waiting: a dependency that is down is logged when its state changes, not at every retry.

A bridge without its `opencode serve` (or with its database gone) retries every few seconds for as long
as it takes. Logging each retry buries everything else; logging nothing hides the outage. `OutageLog`
sits between: one `dependency_lost` at the first failure, a `dependency_still_lost` reminder with the
retry count every `remind_every_s`, one `dependency_back` when it answers again. `status()` is what
`/readyz` shows for it (docs/operations.md). Pure apart from the logger it is given; time is injected.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class EventLogger(Protocol):
    def warning(self, event: str, **kw: Any) -> Any: ...

    def info(self, event: str, **kw: Any) -> Any: ...


class OutageLog:
    REMIND_EVERY_S = 60.0

    def __init__(
        self,
        log: EventLogger,
        dependency: str,
        *,
        remind_every_s: float = REMIND_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self.dependency = dependency
        self._remind_every_s = remind_every_s
        self._clock = clock
        self._lost_at: float | None = None
        self._reminded_at = 0.0
        self.retries = 0  # failures since the dependency was lost (0 while it is up)
        self.error = ""  # the latest failure, while lost

    @property
    def lost(self) -> bool:
        return self._lost_at is not None

    def failed(self, error: str) -> None:
        """One more failed attempt. Logs only the first of a run, then a reminder per interval."""
        now = self._clock()
        self.error = error
        if self._lost_at is None:
            self._lost_at = self._reminded_at = now
            self.retries = 1
            self._log.warning("dependency_lost", dependency=self.dependency, error=error)
            return
        self.retries += 1
        if now - self._reminded_at >= self._remind_every_s:
            self._reminded_at = now
            self._log.warning("dependency_still_lost", dependency=self.dependency, error=error,
                              retries=self.retries, down_s=round(now - self._lost_at, 1))

    def succeeded(self) -> None:
        """The dependency answered. Logs `dependency_back` once if it had been lost."""
        if self._lost_at is None:
            return
        down_s = round(self._clock() - self._lost_at, 1)
        self._log.info("dependency_back", dependency=self.dependency, retries=self.retries, down_s=down_s)
        self._lost_at = None
        self.retries = 0
        self.error = ""

    def status(self) -> dict[str, Any]:
        """For `/readyz`: why it is not ready, since when, how many retries (empty while up)."""
        if self._lost_at is None:
            return {}
        return {"error": self.error, "retries": self.retries, "down_s": round(self._clock() - self._lost_at, 1)}
