"""Per-token rate limit of commands: a token bucket per key, with an injected clock. Pure.

Each token may send `burst` commands at once and `rate_per_s` on average after that (docs/operations.md,
"Limits"). A retry of an already answered `command_id` is counted too: a client hammering the same id
is still hammering. Memory is bounded: at most `max_keys` buckets are kept, the stalest go first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_RATE_PER_S = 2.0
DEFAULT_BURST = 20
MAX_KEYS = 10_000


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    def __init__(self, rate_per_s: float = DEFAULT_RATE_PER_S, burst: int = DEFAULT_BURST,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = MAX_KEYS) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be positive and burst at least 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, key: str) -> float:
        """Take one command for `key`: 0.0 if allowed, else the seconds until one is (nothing taken)."""
        now = self._clock()
        b = self._buckets.pop(key, None)
        if b is None:
            b = _Bucket(float(self.burst), now)
        else:
            b.tokens = min(float(self.burst), b.tokens + (now - b.at) * self.rate_per_s)
            b.at = now
        self._buckets[key] = b
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)
        if b.tokens >= 1.0:
            b.tokens -= 1.0
            return 0.0
        return (1.0 - b.tokens) / self.rate_per_s
