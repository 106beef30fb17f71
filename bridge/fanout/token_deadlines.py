"""The token deadlines of every open `/v1/ws` socket, kept for one shared sweep (bridge.fanout.token_sweep).

Pure bookkeeping, no clock and no I/O: a heap of expiry times (entries of removed sockets are skipped when
they reach the top) and, per token `jti`, the sockets that hold it, so that a revocation ends them all at
once. A socket is any hashable key (the transport uses its `Connection`).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class TokenDeadlines(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()  # ties in the heap never compare keys
        self._expires: dict[K, float] = {}
        self._jti: dict[K, str] = {}
        self._by_jti: dict[str, dict[K, None]] = {}  # insertion-ordered sets

    def __len__(self) -> int:
        return len(self._jti)

    def __contains__(self, key: object) -> bool:
        return key in self._jti

    def add(self, key: K, jti: str, expires_at: float) -> None:
        """Track `key`, holding token `jti` that expires at `expires_at` (inf: never)."""
        self.remove(key)
        self._jti[key] = jti
        self._by_jti.setdefault(jti, {})[key] = None
        if not math.isinf(expires_at):
            self._expires[key] = expires_at
            heapq.heappush(self._heap, (expires_at, next(self._order), key))

    def remove(self, key: K) -> None:
        jti = self._jti.pop(key, None)
        if jti is None:
            return
        self._expires.pop(key, None)  # its heap entry is skipped when it reaches the top …
        if len(self._heap) > 2 * len(self._expires) + 64:  # … or dropped here, once most entries are dead
            self._heap = [e for e in self._heap if self._expires.get(e[2]) == e[0]]
            heapq.heapify(self._heap)
        holders = self._by_jti[jti]
        del holders[key]
        if not holders:
            del self._by_jti[jti]

    def next_expiry(self) -> float | None:
        """The earliest expiry of a tracked key, None if none expires."""
        heap = self._heap
        while heap:
            at, _, key = heap[0]
            if self._expires.get(key) == at:
                return at
            heapq.heappop(heap)  # removed, or re-added with another expiry
        return None

    def expired(self, now: float) -> list[K]:
        """The keys whose token expired at or before `now`, earliest first; no longer tracked."""
        due: list[K] = []
        while (at := self.next_expiry()) is not None and at <= now:
            key = heapq.heappop(self._heap)[2]
            self.remove(key)
            due.append(key)
        return due

    def jtis(self) -> list[str]:
        """The distinct tokens of the tracked keys."""
        return list(self._by_jti)

    def pop_jti(self, jti: str) -> list[K]:
        """Every key holding `jti`, in the order added; no longer tracked."""
        keys = list(self._by_jti.get(jti, ()))
        for key in keys:
            self.remove(key)
        return keys
