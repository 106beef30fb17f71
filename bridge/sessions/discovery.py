"""Which sessions to warm after the bridge (re)connects to `/global/event`: only those with something new.

Live hints are lost while we are disconnected (docs/upstream.md §15), so after every (re)connect the
bridge looks again. Warming every listed session would open one durable stream per session the upstream
ever had (and keep idle ones from being released); instead each candidate costs one cheap request,
`/history?after=<stored cursor>&limit=1`, and, when that shows no v2 event, a read of its sync log after
the cursor (`POST /sync/history`, §14: a session driven only by OpenCode's own clients has legacy events
alone, §13). Only sessions with events past our cursor, sessions the upstream lists as active, and
sessions that vanished upstream (so the follower records the deletion) are warmed. New activity after
that arrives as live hints.

Sessions whose lease is held are not probed at all: a live holder (this process or a peer) is following
them, and a dead holder's lease expires and the lease sweep adopts them (docs/lifecycle.md). So a reconnect
costs one request per *cold* known session, not per session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import SessionNotFound, UpstreamError
from bridge.events import location_directory
from bridge.outage import OutageLog
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient


@dataclass(frozen=True)
class WarmCandidate:
    session_id: str
    directory: str | None
    reason: str  # active | new_events | gone_upstream


async def sessions_to_warm(client: UpstreamClient, store: EventStore, *, concurrency: int = 8) -> list[WarmCandidate]:
    """Raises UpstreamError when the session list itself cannot be read (the caller retries)."""
    listed = {str(s["id"]): location_directory(s) for s in await client.list_sessions()}
    try:
        active = set(await client.active())
    except UpstreamError:
        active = set()  # only an optimisation: /history below still finds running sessions' events
    rows = {r.session_id: r for r in await store.sessions(include_deleted=True)}
    candidates = {sid for sid, row in rows.items() if not row.deleted} | set(listed)
    candidates -= {sid for sid, row in rows.items() if row.deleted or row.lease_owner is not None}
    gate = asyncio.Semaphore(concurrency)

    async def probe(sid: str) -> WarmCandidate | None:
        row = rows.get(sid)
        directory = listed.get(sid, row.directory if row else None)
        if sid in active:
            return WarmCandidate(sid, directory, "active")
        async with gate:
            try:
                page = await client.history(sid, row.cursor_seq if row else 0, limit=1)
            except SessionNotFound:  # tombstoned by its follower, if we stored anything of it
                return WarmCandidate(sid, directory, "gone_upstream") if row and row.cursor_seq > 0 else None
            except UpstreamError:
                return WarmCandidate(sid, directory, "new_events")  # cannot tell: follow to be safe
        if not page.events:
            # Outside the gate: the probes waiting here are asked together, in one or a few requests
            # (bridge.upstream.sync_batch).
            try:
                logged = await client.sync_history(sid, row.cursor_seq if row else 0)
                page_events = [i for i in logged if isinstance(i, dict) and i.get("aggregate_id") == sid]
            except UpstreamError:
                page_events = [{}]  # cannot tell (e.g. over the body bound): follow to be safe
            if not page_events:
                return None
        return WarmCandidate(sid, directory, "new_events")

    found = await asyncio.gather(*(probe(sid) for sid in sorted(candidates)))
    return [c for c in found if c is not None]


async def run_coalesced(
    trigger: asyncio.Event,
    run_once: Callable[[], Awaitable[bool]],
    min_interval_s: float,
    retry_delay: Callable[[bool], float],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run `run_once` whenever `trigger` is set, at most once per `min_interval_s`: triggers that come
    meanwhile (a legacy prompt closes /api/event, so each one is a reconnect) coalesce into one more run.
    `run_once` returns False when it failed; it is then retried after `retry_delay(False)` (a backoff),
    and `retry_delay(True)` resets that backoff after a success."""
    while True:
        await trigger.wait()
        trigger.clear()
        if not await run_once():
            trigger.set()
            await sleep(retry_delay(False))
            continue
        retry_delay(True)
        await sleep(min_interval_s)


class Warmer(Protocol):
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...


class Discovery:
    """At start and after every `/api/event` (re)connect (`request()`), at most once per
    `min_interval_s`, warm the sessions that have something new. A failed run is retried after a capped
    backoff and counted (`bridge_discovery_failures_total`)."""

    def __init__(self, client: UpstreamClient, store: EventStore, warmer: Warmer, *, min_interval_s: float,
                 retry_min_s: float, retry_max_s: float) -> None:
        self._client = client
        self._store = store
        self._warmer = warmer
        self._min_interval_s = min_interval_s
        self._backoff = Backoff(retry_min_s, retry_max_s)
        self._trigger = asyncio.Event()
        self._log = structlog.get_logger("bridge.daemon").bind(upstream=store.upstream)
        self._outage = OutageLog(self._log, "upstream_discovery")  # logged when lost and back, not per retry

    def request(self) -> None:
        self._trigger.set()

    async def run(self) -> None:
        self._trigger.set()
        await run_coalesced(self._trigger, self.once, self._min_interval_s, self._retry_delay)

    async def once(self) -> bool:
        try:
            found = await sessions_to_warm(self._client, self._store)
        except Exception as e:  # the upstream or the database away: retried with backoff, never fatal
            metrics.DISCOVERY_FAILURES.inc()
            self._outage.failed(f"{type(e).__name__}: {e}")
            return False
        self._outage.succeeded()
        for c in found:
            self._warmer.warm(c.session_id, c.directory, reason=c.reason)
        self._log.info("session_discovery", warmed=len(found))
        return True

    def _retry_delay(self, succeeded: bool) -> float:
        if succeeded:
            self._backoff.reset()
            return 0.0
        return self._backoff.next_delay()
