"""Re-sync of the pending requests (permission requests and questions, both runtimes) from the upstream's
list routes (docs/upstream.md §4.4, §16, §18), since none of them is in the sync log and `/global/event`
loses what is sent while the bridge is away.

A pass runs after every live (re)connect — the first one is the start-up — over the sessions in scope:
those with local subscribers, the warm ones, and those with a request stored as pending. `request_session`
asks for a pass over one session (a new subscriber: a question asked while the bridge was down is found
then, even for a session nothing else warmed). For each session, against the list routes:

- a request pending upstream and never seen here is recorded and pushed as asked;
- a request pending here but no longer upstream was settled meanwhile: recorded and pushed as `unknown`
  (a permission `replied unknown`, a question `unknown`).

A list that could not be read judges nothing. `request()` / `request_session()` only note the wish (the
live reader is never blocked); `run()` is a task of the fan-out; wishes made during a pass coalesce.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import structlog

from bridge import metrics
from bridge.events import PermissionUpdate, pending_request, resolved_while_away
from bridge.events.question import pending_question, settled_while_away
from bridge.events.stored import stored_permission
from bridge.fanout.hub import Hub
from bridge.fanout.relay import LiveRelay
from bridge.fanout.state_resync import StateResync
from bridge.store.reads import FanoutStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.requests import UpstreamRequests

RESOLVED_NOTE = "answered while the bridge was disconnected from /global/event"
# A session re-synced for a subscriber is not re-synced for the next one before this (a page reloaded in a
# loop must not become a stream of upstream requests); reconnect passes are never skipped.
SESSION_RESYNC_MIN_S = 10.0


def legacy_permission(item: dict[str, Any]) -> PermissionUpdate | None:
    """One item of the legacy `GET /permission` (the properties of its `permission.asked`)."""
    sid, rid = item.get("sessionID"), item.get("id")
    if not (isinstance(sid, str) and sid and isinstance(rid, str) and rid):
        return None
    return stored_permission(sid, {"id": f"bridge_resync_asked_{rid}", "type": "permission.asked",
                                   "properties": item})


class RequestResync:
    def __init__(self, hub: Hub, store: FanoutStore, relay: LiveRelay, client: UpstreamClient,
                 warm: Callable[[], Iterable[str]] | None = None,
                 clock: Callable[[], float] = time.monotonic, state: StateResync | None = None,
                 requests: UpstreamRequests | None = None) -> None:
        self._hub = hub
        self.state = state  # todo lists and diff summaries, re-read in the same passes (bridge.fanout.state_resync)
        self._store = store
        self._relay = relay
        self._client = client
        # The list routes of the serve's generation (OpenCode 2.x's forms: docs/upstream.md §24); 1.x's by default.
        self._upstream = requests or UpstreamRequests(client)
        self._warm = warm
        self._wanted = asyncio.Event()
        self._all = False
        self._sessions: set[str] = set()
        self._clock = clock
        self._synced: dict[str, float] = {}  # session -> when a subscriber's pass last covered it
        self._log = structlog.get_logger("bridge.relay").bind(upstream=store.upstream)

    def request(self) -> None:
        self._all = True
        self._wanted.set()

    def request_session(self, session_id: str) -> None:
        now = self._clock()
        if self._synced.get(session_id, -SESSION_RESYNC_MIN_S) > now - SESSION_RESYNC_MIN_S:
            return
        if len(self._synced) > 10_000:
            self._synced.clear()
        self._synced[session_id] = now
        self._sessions.add(session_id)
        self._wanted.set()

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            full, sessions = self._all, self._sessions
            self._all, self._sessions = False, set()
            try:
                # todo lists / diffs: anything may have changed while the stream was away; what was kept and
                # what pages watch is read again (the rest is asked of the serve when read)
                kept = self.state.state.mark_stale() if full and self.state is not None else set()
                scope = await self._scope() if full else sessions
                await self.sync_many(scope | sessions)
                if self.state is not None:
                    watched = set(self._hub.sessions()) if full else set()
                    await self.state.sync(kept | watched | sessions, subscribed=sessions)
            except Exception as e:
                self._log.error("request_resync_failed", error=f"{type(e).__name__}: {e}")
            metrics.REQUEST_RESYNC_PASSES.inc()

    async def _scope(self) -> set[str]:
        scope = set(self._hub.sessions()) | set(self._warm() if self._warm is not None else ())
        return scope | {r.session_id for r in await self._relay.pending.pending()}

    async def sync(self, sid: str) -> None:
        await self.sync_many({sid})

    async def sync_many(self, sids: set[str]) -> None:
        for sid in sorted(sids):
            try:
                await self._sync_v2(sid)
            except Exception as e:
                self._log.error("permission_resync_failed", session_id=sid, error=f"{type(e).__name__}: {e}")
        await self._sync_legacy(sids)

    async def _sync_v2(self, sid: str) -> None:
        # Read our table before asking upstream: a request asked live after this read is not judged.
        stored = await self._store.permission_replies(sid, runtime="v2")
        questions = await self._relay.pending.session_requests(sid, "question", runtime="v2")
        try:
            permissions = await self._upstream.v2_permissions(sid)
        except Exception as e:
            self._log.warning("permission_resync_upstream_failed", session_id=sid, error=str(e))
        else:
            seen = set()
            for item in permissions:
                update = pending_request(sid, item)
                if update is not None:
                    seen.add(update.request_id)
                    if update.request_id not in stored:
                        await self._emit_permission(update)
            for rid, reply in stored.items():
                if reply is None and rid not in seen:
                    await self._emit_permission(resolved_while_away(sid, rid, RESOLVED_NOTE))
        try:
            asked = await self._upstream.v2_questions(sid)
        except Exception as e:
            self._log.warning("question_resync_upstream_failed", session_id=sid, error=str(e))
            return
        await self._questions("v2", {sid}, questions, [pending_question("v2", i, sid) for i in asked])

    async def _sync_legacy(self, sids: set[str]) -> None:
        """The legacy lists are per location (every session of a directory): read once per directory."""
        pending = self._relay.pending
        stored_p = {sid: await self._store.permission_replies(sid, runtime="legacy") for sid in sids}
        stored_q = {sid: await pending.session_requests(sid, "question", runtime="legacy") for sid in sids}
        for directory, members in (await pending.directories(sids)).items():
            try:
                questions = await self._upstream.legacy_questions(directory)
                permissions = await self._upstream.legacy_permissions(directory)
            except Exception as e:
                self._log.warning("legacy_resync_upstream_failed", directory=directory, error=str(e))
                continue
            # A session whose directory the mirror does not know was listed without a location (the serve's
            # own): what is missing there may live elsewhere, so nothing of it is judged settled.
            judge = directory is not None
            merged = {rid: r for sid in members for rid, r in stored_q[sid].items()}
            await self._questions("legacy", members, merged, [pending_question("legacy", i) for i in questions],
                                  judge)
            seen = set()
            for item in permissions:
                update = legacy_permission(item)
                if update is None or update.session_id not in members:
                    continue
                seen.add(update.request_id)
                if update.request_id not in stored_p[update.session_id]:
                    await self._emit_permission(update)
            for sid in members if judge else ():
                for rid, reply in stored_p[sid].items():
                    if reply is None and rid not in seen:
                        gone = resolved_while_away(sid, rid, RESOLVED_NOTE)
                        await self._emit_permission(replace(gone, runtime="legacy"))

    async def _questions(self, runtime: str, members: set[str], stored: dict[str, str | None],
                         upstream: list[Any], judge: bool = True) -> None:
        seen = set()
        for update in upstream:
            if update is None or update.session_id not in members:
                continue
            seen.add(update.request_id)
            if update.request_id not in stored:
                self._log.info("question_resynced", session_id=update.session_id, request_id=update.request_id)
                await self._relay.question(update)
        if not judge:
            return
        sessions = await self._relay.pending.sessions_of(
            [rid for rid, reply in stored.items() if reply is None and rid not in seen])
        for rid, sid in sessions.items():
            self._log.info("question_resynced", session_id=sid, request_id=rid, state="unknown")
            await self._relay.question(settled_while_away(sid, rid, runtime, RESOLVED_NOTE))

    async def _emit_permission(self, update: PermissionUpdate) -> None:
        self._log.info("permission_resynced", session_id=update.session_id,
                       state="replied" if update.replied else "asked", request_id=update.request_id)
        await self._relay.permission(update)


PermissionResync = RequestResync  # the name before questions joined (bridge.dispatch, tests)
