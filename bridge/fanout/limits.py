"""Bounds of the WebSocket per connection, per token and per client address (docs/security.md, "Floods").
Pure: the clock is injected.

- `OpBucket`: every op a connection sends (ping, sessions, subscribe, unsubscribe, command) takes one token
  of its bucket (`OpLimits.burst` at once, `rate_per_s` after that). An op over the limit is held back
  until the bucket has a token again: the connection's reader waits, so a flooding client is slowed by
  its own TCP window and costs nothing more; it is told once per episode (`rate_limited` error frame).
  Other connections have buckets of their own and are never slowed.
- `ConnectionSlots`: open sockets counted after the token was checked (a stranger never holds a slot),
  at most `per_token` per `jti`, `per_address` per client address and `total` in all; `total` stays below
  the HTTP connection cap so health probes and plain requests always find a connection.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_OP_RATE_PER_S = 50.0
DEFAULT_OP_BURST = 200  # a viewer subscribing to MAX_SUBSCRIPTIONS sessions at once stays under it
DEFAULT_PER_TOKEN = 32
DEFAULT_PER_ADDRESS = 256
DEFAULT_TOTAL = 900
HEALTH_RESERVE = 0.1  # of BRIDGE_HTTP_MAX_CONNECTIONS kept from WebSockets (probes, metrics, commands)


@dataclass(frozen=True)
class OpLimits:
    rate_per_s: float = DEFAULT_OP_RATE_PER_S
    burst: int = DEFAULT_OP_BURST
    clock: Callable[[], float] = time.monotonic

    def bucket(self) -> OpBucket:
        return OpBucket(self)


class OpBucket:
    def __init__(self, limits: OpLimits) -> None:
        self._limits = limits
        self._tokens = float(limits.burst)
        self._at = limits.clock()
        self.throttled = False  # in an episode of held-back ops (told once)

    def take(self) -> float:
        """0.0 if the op may run now (one token taken), else the seconds to wait; after waiting that
        long the caller takes again."""
        now = self._limits.clock()
        self._tokens = min(float(self._limits.burst), self._tokens + (now - self._at) * self._limits.rate_per_s)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            if self._tokens >= self._limits.burst / 2:
                self.throttled = False  # recovered: a later flood is told again
            return 0.0
        return (1.0 - self._tokens) / self._limits.rate_per_s


@dataclass
class ConnectionSlots:
    per_token: int = DEFAULT_PER_TOKEN
    per_address: int = DEFAULT_PER_ADDRESS
    total: int = DEFAULT_TOTAL
    _tokens: Counter[str] = field(default_factory=Counter)
    _addresses: Counter[str] = field(default_factory=Counter)
    _open: int = 0

    def acquire(self, jti: str, address: str) -> str | None:
        """Take a slot: None, or why not (`token`, `address`, `total`) with nothing taken."""
        if self._open >= self.total:
            return "total"
        if self._tokens[jti] >= self.per_token:
            return "token"
        if self._addresses[address] >= self.per_address:
            return "address"
        self._open += 1
        self._tokens[jti] += 1
        self._addresses[address] += 1
        return None

    def release(self, jti: str, address: str) -> None:
        self._open -= 1
        for counts, key in ((self._tokens, jti), (self._addresses, address)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]

    @property
    def open(self) -> int:
        return self._open
