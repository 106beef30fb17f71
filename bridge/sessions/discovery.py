"""Which sessions to warm after the bridge (re)connects to `/global/event`: only those with something new.

Live hints are lost while we are disconnected (docs/upstream.md §15), so after every (re)connect the
bridge looks again. Warming every listed session would open one durable stream per session the upstream
ever had (and keep idle ones from being released); instead (docs/mirror.md "Which sessions are followed"):
- a session the upstream lists as active is warmed (`active`);
- a listed session we never stored is warmed without asking: its log holds at least seq 0, which we lack
  (`new_events`; docs/upstream.md §14);
- a stored session the list no longer shows was deleted upstream (`GET /api/session` lists every session
  of the server, §6): warmed so that its follower meets the 404 and records the deletion (`gone_upstream`),
  if anything of it was stored (cursor > 0);
- a listed stored session is asked for its sync log after the stored cursor (`POST /sync/history`, §14:
  both runtimes' events, so a session driven only by OpenCode's own clients is seen too, §13); every such
  session is asked in **one** call that keeps no event, only each session's head
  (`UpstreamClient.sync_heads`: the ones it cannot name come back whole, which shows their heads too), and
  one with events after its cursor is warmed (`new_events`).
New activity after that arrives as live hints.

Sessions whose lease is held are not probed at all: a live holder (this process or a peer) is following
them, and a dead holder's lease expires and the lease sweep adopts them (docs/lifecycle.md). So a reconnect
costs one sync-log call for all the *cold* known sessions, and nothing per session never stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import UpstreamError, UpstreamUnavailable
from bridge.events import location_directory
from bridge.outage import OutageLog
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient


@dataclass(frozen=True)
class WarmCandidate:
    session_id: str
    directory: str | None
    reason: str  # active | new_events | gone_upstream


async def sessions_to_warm(client: UpstreamClient, store: EventStore) -> list[WarmCandidate]:
    """Raises UpstreamError when the session list itself cannot be read (the caller retries)."""
    listed = {str(s["id"]): location_directory(s) for s in await client.list_sessions()}
    try:
        active = set(await client.active())
    except UpstreamError:
        active = set()  # only an optimisation: the sync log below still finds running sessions' events
    rows = {r.session_id: r for r in await store.sessions(include_deleted=True)}
    candidates = {sid for sid, row in rows.items() if not row.deleted} | set(listed)
    candidates -= {sid for sid, row in rows.items() if row.deleted or row.lease_owner is not None}

    found: list[WarmCandidate] = []
    asked: dict[str, int] = {}
    for sid in sorted(candidates):
        row = rows.get(sid)
        directory = listed.get(sid, row.directory if row else None)
        if sid in active:
            found.append(WarmCandidate(sid, directory, "active"))
        elif row is None:  # listed, never stored: seq 0 at least is news
            found.append(WarmCandidate(sid, directory, "new_events"))
        elif sid not in listed:  # gone upstream: its follower records the deletion, if anything was stored
            if row.cursor_seq > 0:
                found.append(WarmCandidate(sid, directory, "gone_upstream"))
        else:
            asked[sid] = row.cursor_seq
    if asked:  # one call for every cold session
        try:
            news = sorted(await client.sync_heads(asked))
        except UpstreamUnavailable:
            raise  # the serve is away: the run fails and is retried with backoff
        except UpstreamError as e:  # cannot tell (a refused or unreadable answer): follow them all
            structlog.get_logger("bridge.daemon").warning("discovery_heads_unreadable", sessions=len(asked),
                                                          error=str(e))
            news = sorted(asked)
        found += [WarmCandidate(sid, listed.get(sid), "new_events") for sid in news]
    return found


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
