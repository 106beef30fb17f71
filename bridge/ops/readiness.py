"""What `/readyz` checks and what feeds the systemd watchdog, built from the running parts.

The database and the upstream are asked at most once a second whatever the probe rate
(bridge.http.app.coalesced); the in-process facts (started/stopping, live stream, followers) are always
fresh."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.config import Settings
from bridge.errors import Unauthorized, UpstreamError
from bridge.http.app import ReadinessCheck, coalesced
from bridge.http.security import token_holder
from bridge.ops.health import HealthMonitor, HealthTimes
from bridge.ops.sdnotify import Notifier
from bridge.ops.status_summary import StatusSummary
from bridge.outage import OutageLog
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.db import schema_is_at_head
from bridge.upstream.client import UpstreamClient


async def upstream_auth_check(client: UpstreamClient) -> dict[str, Any]:
    """Reachable and authenticated: `/api/health` needs the basic-auth password too (docs/upstream.md §8)."""
    try:
        async with asyncio.timeout(3.0):
            await client.health()
    except Unauthorized as e:
        return {"ok": False, "error": str(e)[:300], "authenticated": False}
    except (UpstreamError, TimeoutError) as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"ok": True}


class LiveSource(Protocol):
    """The live side of the upstream, as /readyz shows it: the 1.x `/global/event` reader
    (bridge.upstream.live) or 2.x's change hints (bridge.sessions.changes)."""

    connected: asyncio.Event
    outage: OutageLog


def readiness_check(engine: AsyncEngine, client: UpstreamClient, live: LiveSource, sessions: FollowerSupervisor,
                    started: Callable[[], bool], *,
                    generation: Callable[[], Awaitable[dict[str, Any]]] | None = None,
                    workers: Callable[[], Awaitable[dict[str, Any]]] | None = None) -> ReadinessCheck:
    """`workers`: one of a host's BRIDGE_WORKERS processes answers for the whole set (bridge.workers.set_state)."""
    async def dependencies() -> dict[str, Any]:
        checks: dict[str, Any] = {}
        try:
            async with engine.connect() as conn:
                await conn.execute(text("select 1"))
            checks["database"] = {"ok": True}
            checks["migrations"] = {"ok": await schema_is_at_head(engine)}
        except Exception as e:
            checks["database"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
        checks["upstream_auth"] = await upstream_auth_check(client)
        if generation is not None:  # the serve's OpenCode generation vs the running driver's
            checks["upstream_generation"] = await generation()
        return checks

    shared_dependencies = coalesced(dependencies, 1.0)

    async def readiness() -> dict[str, Any]:
        checks: dict[str, Any] = {"started": {"ok": started()}}
        checks.update(await shared_dependencies())
        checks["upstream_live"] = {"ok": live.connected.is_set(), **live.outage.status()}
        checks["followers"] = {"ok": sessions.running, "warm": len(sessions.warm_sessions())}
        if workers is not None:  # a file read, always fresh: a worker's death shows at the next probe
            checks["workers"] = await workers()
        return checks

    return readiness


def readiness_detail(secret: str, settings: Settings, revoked: Callable[[str], bool] | None = None
                     ) -> Callable[[web.Request], bool]:
    """Who sees /readyz error texts (they name hosts and users): a valid token's holder, in every mode
    (BRIDGE_AUTH_DISABLED=true has a token too: the one printed at start)."""
    return token_holder(secret, settings.upstream_name, revoked)


def health_monitor(notifier: Notifier, engine: AsyncEngine, sessions: FollowerSupervisor) -> HealthMonitor:
    async def database_probe() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("select 1"))

    def supervisor_alive() -> bool:
        return sessions.running

    def warm_count() -> int:
        return len(sessions.warm_sessions())

    # Tick six times per WatchdogSec (sd_watchdog_enabled(3) asks for at least two): a withheld tick (a loop late
    # by more than a second once, under a burst or a collection) is not a restart; a bridge unhealthy at every
    # tick for WatchdogSec is. Without a watchdog still tick for STATUS= and the loop-lag metric.
    # The bounds of one tick stay those of half the period (1 s late, 5 s for the database at WatchdogSec=30).
    half = notifier.watchdog_interval_s or 5.0
    interval = half / 3 if notifier.watchdog_interval_s else half
    return HealthMonitor(
        notifier,
        database_probe=database_probe,
        supervisor_alive=supervisor_alive,
        status_line=StatusSummary(warm_count),
        times=HealthTimes(interval, max_loop_lag_s=min(1.0, half), probe_timeout_s=min(5.0, half)),
    )


def status_line(sessions: FollowerSupervisor) -> str:
    return f"following {len(sessions.warm_sessions())} sessions"
