"""What one durable follower (bridge.upstream.durable) is built with: how it reads and waits, and what it
shares with its session and its process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bridge.config import Settings
from bridge.events import ChatEvent
from bridge.perf.turnstile import Turnstile
from bridge.upstream.ingest import Seed, StoredCursor
from bridge.upstream.stall_policy import StallGovernor


@dataclass(frozen=True)
class FollowerSettings:
    """How one durable follower reads and waits (bridge.config.Settings gives the process's)."""

    batch_max_events: int = 200
    reconnect_min_s: float = 0.2
    reconnect_max_s: float = 5.0
    stall_s: float = 10.0
    history_page: int = 100
    upstream: str = ""
    max_stuck_passes: int = 5
    repair_debounce_s: float = 0.03
    twin_hold_s: float = 3.0
    history_prefetch: bool = True  # `/history` pages one ahead of the writes (False: one at a time)

    @classmethod
    def of(cls, settings: Settings) -> FollowerSettings:
        return cls(batch_max_events=settings.batch_max_events, reconnect_min_s=settings.reconnect_min_s,
                   reconnect_max_s=settings.reconnect_max_s, stall_s=settings.durable_stall_s,
                   upstream=settings.upstream_name)


@dataclass(frozen=True)
class FollowerHooks:
    """What a durable follower shares with its session and its process."""

    on_committed: Callable[[Sequence[ChatEvent]], None] | None = None
    # The stored rows the legacy turn state starts from, and the stored cursor (bridge.upstream.ingest).
    seed: Seed | None = None
    stored_cursor: StoredCursor | None = None
    turnstile: Turnstile | None = None  # one per process (bridge.perf.turnstile)
    # One governor for every follower of the process: many streams late at once means the process is slow,
    # not the streams (bridge.upstream.stall_policy); alone, a follower judges by itself.
    stall_governor: StallGovernor | None = None
    rand: Callable[[], float] | None = None  # the reconnect backoff's jitter
