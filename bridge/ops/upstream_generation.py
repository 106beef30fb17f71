"""The serve's OpenCode generation at start-up, in `/readyz` and later (docs/upstream.md "OpenCode 2.x",
"Recognition"): which driver runs, and the one line that stops the bridge when none fits.

- At start-up (`startup_choice`), before the database is touched: the serve is asked once; a serve of
  another generation than `BRIDGE_UPSTREAM_GENERATION`, or of one this build has no driver for, raises
  `UpstreamRefused` (a `ConfigError`: `opencode-bridge` prints its one line and exits 2).
- A serve that did not answer then (down, no password yet) does not hold start-up back, as before: the
  configured driver (else the verified 1.x one) starts, and `GenerationGuard` asks again with backoff until
  the serve answers; a mismatch then stops the daemon with the same line.
- `/readyz` carries `upstream_generation`: failing while the serve is of another generation than the
  running driver (a serve replaced behind the same URL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from bridge.backoff import Backoff
from bridge.config import Settings
from bridge.errors import ConfigError
from bridge.upstream.generation import DriverChoice, Recognition, choose_driver
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.recognize import recognize
from bridge.upstream.transport import Transport

# The generations this build has a driver for (bridge.upstream.driver; 2.x: written from its source, not
# verified on a 2.x serve, docs/upstream.md §24).
AVAILABLE_DRIVERS = frozenset({1, 2})


class UpstreamRefused(ConfigError):
    """The serve is of a generation the bridge will not drive; the message is the one line to print."""


def decide(recognition: Recognition, settings: Settings, upstream: str,
           available: frozenset[int] = AVAILABLE_DRIVERS) -> DriverChoice:
    choice = choose_driver(recognition, settings.upstream_generation, available, upstream)
    if choice.refusal is not None:
        raise UpstreamRefused(choice.refusal)
    return choice


async def startup_choice(settings: Settings, *, transport: Transport | None = None,
                         available: frozenset[int] = AVAILABLE_DRIVERS) -> tuple[DriverChoice, Recognition]:
    """The driver to start with, from one round of probes; raises UpstreamRefused."""
    async with UpstreamHttp(settings.upstream_url, settings.upstream_username, settings.upstream_password.value,
                            request_timeout_s=5.0, transport=transport) as http:
        recognition = await recognize(http)
        return decide(recognition, settings, http.base_url, available), recognition


def generation_check(client: UpstreamHttp, running: int) -> Callable[[], Awaitable[dict[str, Any]]]:
    """`/readyz`'s `upstream_generation`: ok unless the serve says it is another generation than the
    running driver's (not recognised — down, no password — is for the other checks to report)."""

    async def check() -> dict[str, Any]:
        rec = await recognize(client)
        out: dict[str, Any] = {"ok": rec.generation in (None, running), "driver": running}
        if rec.generation is None:
            out["recognised"] = False
            out["reason"] = rec.reason
        else:
            out.update(generation=rec.generation, version=rec.version)
        return out

    return check


class GenerationGuard:
    """Started when the serve was not recognised at start-up: asks again (backoff) until it answers, then
    either settles (the running driver fits) or calls `refuse(line)` once."""

    def __init__(self, client: UpstreamHttp, settings: Settings, running: int, refuse: Callable[[str], None], *,
                 available: frozenset[int] = AVAILABLE_DRIVERS, max_delay_s: float | None = None) -> None:
        self._client = client
        self._settings = settings
        self._running = running
        self._refuse = refuse
        self._available = available
        self._backoff = Backoff(settings.reconnect_min_s, max_delay_s or settings.reconnect_max_s)
        self.settled: Recognition | None = None
        self._log = structlog.get_logger("bridge.upstream").bind(upstream=settings.upstream_name)

    async def run(self) -> None:
        while True:
            rec = await recognize(self._client)
            if rec.generation is not None:
                break
            await asyncio.sleep(self._backoff.next_delay())
        self.settled = rec
        try:
            choice = decide(rec, self._settings, self._client.base_url, self._available)
        except UpstreamRefused as e:
            self._refuse(str(e))
            return
        if choice.generation != self._running:
            # auto chose the verified 1.x driver blind; the serve turned out to be another (available) one.
            self._refuse(f"the upstream at {self._client.base_url} turned out to be {rec.describe()} while the "
                         f"{self._running}.x driver runs: restart the bridge to drive it")
            return
        self._log.info("upstream_generation", generation=rec.generation, version=rec.version, route=rec.route)
