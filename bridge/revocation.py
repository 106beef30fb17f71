"""The revocation list as every token check sees it (docs/security.md, "Tokens"): the `jti`s of
`bridge_revoked_tokens`, held in memory and reloaded every `REFRESH_S`. A check never waits for the
database; a token revoked with `opencode-bridge token --revoke JTI` is refused by every process within
REFRESH_S, on HTTP and on the WebSocket (open sockets of that token are closed 4401 as fast).

While the database does not answer the last list stays in force (the list only grows: nothing revoked
comes back), and the failure is logged and counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from bridge import metrics

REFRESH_S = 5.0

_log = structlog.get_logger("bridge.revocation")


class RevocationList:
    def __init__(self, load: Callable[[], Awaitable[frozenset[str]]], refresh_s: float = REFRESH_S) -> None:
        self._load = load
        self.refresh_s = refresh_s
        self._jtis: frozenset[str] = frozenset()

    def revoked(self, jti: str) -> bool:
        return jti in self._jtis

    async def refresh(self) -> None:
        self._jtis = await self._load()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)  # a period, not a condition: the list is polled
            try:
                await self.refresh()
            except Exception as e:  # the database is away: keep the last list
                metrics.REVOCATION_REFRESH_FAILURES.inc()
                _log.warning("revocation_refresh_failed", error=f"{type(e).__name__}: {e}"[:300])


def never_revoked(_jti: str) -> bool:
    return False
