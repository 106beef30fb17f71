"""What the fan-out takes from the live reader: deltas (ephemeral, straight to the hub) and pending requests
— permission requests and questions (live-only upstream, docs/upstream.md §4.4, §18: stored in our own
table first, so a page opened later still sees a pending one, then pushed) — of both runtimes alike: a
legacy `message.part.delta` is the same `delta:text` / `delta:reasoning` as a v2 `*.delta`, a legacy
`permission.asked` / `.replied` the same `permission:asked` / `:replied` as `permission.v2.*`
(docs/legacy.md), recorded with the runtime that asked. Every change of a request is also handed to the
`on_request` callbacks (the sessions part's status machines: `waiting`, docs/lifecycle.md).

`/global/event` is lossy: after every (re)connect bridge.fanout.resync reads the list routes back."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import structlog

from bridge import metrics
from bridge.events import ChatEvent, PermissionUpdate, is_delta, permission_update
from bridge.events.pending import PENDING, PERMISSION, QUESTION, RequestChange, permission_state
from bridge.events.question import QuestionUpdate, question_update
from bridge.fanout.frames import live_question_message, live_state_message
from bridge.fanout.hub import Hub
from bridge.fanout.live_state import LiveSessionState
from bridge.fanout.protocol import permission_message
from bridge.store.ports import PendingRequestsPort
from bridge.store.reads import FanoutStore
from bridge.store.session_errors import SessionErrorStore


class LiveRelay:
    def __init__(self, hub: Hub, store: FanoutStore, pending: PendingRequestsPort | None = None,
                 state: LiveSessionState | None = None, errors: SessionErrorStore | None = None,
                 on_request: Iterable[Callable[[RequestChange], None]] = ()) -> None:
        self._hub = hub
        # the latest todo list / diff summary of each session (bridge.fanout.live_state)
        self.state = state or LiveSessionState()
        self.errors = errors  # session-level errors recorded for the audit (bridge.store.session_errors)
        self._store = store
        self.pending = pending or store.pending_store()
        self._on_request = tuple(on_request)
        self._log = structlog.get_logger("bridge.relay").bind(upstream=store.upstream)

    def watched(self, session_id: str) -> bool:
        """A subscriber of this process watches the session (its deltas and states have somewhere to go)."""
        return self._hub.has_subscribers(session_id)

    async def on_live_event(self, ev: ChatEvent) -> None:
        sid = ev.session_id
        if not sid:
            return
        if is_delta(ev.kind):
            self._hub.publish_delta(sid, ev)
            return
        update = permission_update(ev)
        if update is not None:
            await self.permission(update)
            return
        question = question_update(ev)
        if question is not None:
            await self.question(question)
            return
        state = live_state_message(ev)  # todo list, diff summary, session error (bridge.fanout.frames)
        if state is not None:
            self.state.apply(state)
            if state["type"] == "session_error":
                await self._record_error(ev)
            self._hub.publish_state(sid, state)

    async def _record_error(self, ev: ChatEvent) -> None:
        if self.errors is None or ev.session_id is None:
            return
        try:
            await self.errors.record(ev.session_id, ev.event_id, ev.error_type, ev.error_message,
                                     ev.envelope.raw, datetime.now(UTC))
        except Exception as e:  # the live subscribers still get it
            self._log.error("session_error_store_failed", session_id=ev.session_id, error=f"{type(e).__name__}: {e}")

    async def permission(self, update: PermissionUpdate) -> None:
        """Store a permission request's new state, then push it to the session's subscribers."""
        sid, now = update.session_id, datetime.now(UTC)
        try:
            if update.replied:
                await self._store.permission_replied(sid, update.request_id, update.record, now, update.reply)
            else:
                await self._store.permission_asked(sid, update.request_id, update.record, now, update.action,
                                                   update.assistant_message_id, update.call_id, update.runtime)
        except Exception as e:  # still tell the live subscribers; only a later page would miss it
            self._log.error("permission_store_failed", session_id=sid, request_id=update.request_id,
                            error=f"{type(e).__name__}: {e}")
        self._hub.publish_state(sid, permission_message(sid, update))
        state = permission_state(update.reply or "unknown") if update.replied else PENDING
        self._changed(RequestChange(PERMISSION, sid, update.request_id, state, now, update.runtime))

    async def question(self, update: QuestionUpdate) -> None:
        """Store a question's new state, then push it to the session's subscribers."""
        sid, now = update.session_id, datetime.now(UTC)
        try:
            await self.pending.question(update, now)
        except Exception as e:  # as for permissions: the live subscribers still get it
            self._log.error("question_store_failed", session_id=sid, request_id=update.request_id,
                            error=f"{type(e).__name__}: {e}")
        self._hub.publish_state(sid, live_question_message(update, now))
        metrics.QUESTIONS.labels(state=update.state).inc()
        self._log.info("question", session_id=sid, request_id=update.request_id, state=update.state,
                       runtime=update.runtime)
        state = PENDING if update.state == "asked" else update.state
        self._changed(RequestChange(QUESTION, sid, update.request_id, state, now, update.runtime))

    def _changed(self, change: RequestChange) -> None:
        for callback in self._on_request:
            try:
                callback(change)
            except Exception as e:  # a status machine's bug must not stop the relay
                self._log.error("request_change_failed", error=f"{type(e).__name__}: {e}")


