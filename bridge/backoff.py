"""Capped exponential backoff with full jitter (pure; randomness injected)."""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    def __init__(
        self, min_s: float, max_s: float, rand: Callable[[], float] = random.random, factor: float = 2.0
    ) -> None:
        self.min_s = min_s
        self.max_s = max_s
        self.factor = factor
        self._rand = rand
        self.attempt = 0

    def next_delay(self) -> float:
        """Delay before the next attempt: uniform in [min, min(max, min * factor**attempt)]."""
        ceiling = min(self.max_s, self.min_s * self.factor**self.attempt)
        self.attempt += 1
        return self.min_s + (ceiling - self.min_s) * self._rand()

    def reset(self) -> None:
        self.attempt = 0
