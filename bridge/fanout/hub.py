"""The hub: per session, the local subscribers; publishing is synchronous and never blocks.

Durable events reach the hub only after their transaction committed (the feed reads them back from
PostgreSQL by seq), so a client never sees an uncommitted event. Each subscription remembers
`sent_seq`, the highest durable seq it has queued for its client: anything at or below it is a
duplicate and is skipped, which is what makes replay-then-live exact (see `Subscription`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from bridge.events import ChatEvent
from bridge.fanout import metrics
from bridge.fanout.protocol import delta_message, dumps, erased_message, status_message, truncated_event
from bridge.fanout.queue import ClientQueue, QueueLimits

# While a subscription replays from the database, live traffic for it is held here; past this many
# messages the held traffic is dropped and the replay simply reads the database once more.
PENDING_MAX = 1000

_ids = itertools.count(1)


@dataclass
class _Held:
    seq: int | None  # durable seq, None for ephemeral/state messages
    frame: str | None  # serialized, for durable and state messages
    delta: ChatEvent | None = None
    status_version: int | None = None  # for status messages: chat_sessions.status_version


@dataclass
class Subscription:
    """One client's subscription to one session.

    Life: registered in `replaying` state (live traffic is held in `pending`), the replay reads the
    database with seq > sent_seq until exhausted, then `Hub.go_live` queues the held messages that are
    still new and switches to live, synchronously. Registering before reading means no event can fall
    between the replay and live; skipping seq <= sent_seq means none is sent twice."""

    client: Client
    session_id: str
    sent_seq: int
    start_seq: int = -1  # the `after` it was opened with (-1: from the beginning)
    replaying: bool = True
    pending: list[_Held] = field(default_factory=list)
    pending_overflowed: bool = False
    # The newest status version this client has (from `subscribed` or a `status` message): an older
    # status, however late its notification arrives, is never sent after a newer one.
    status_version: int = 0


class Client:
    """One WebSocket connection, as the hub sees it: a bounded queue and its subscriptions."""

    def __init__(self, limits: QueueLimits, on_overflow: Callable[[Client], None] | None = None) -> None:
        self.id = next(_ids)
        self.queue = ClientQueue(limits)
        self.subscriptions: dict[str, Subscription] = {}
        self._on_overflow = on_overflow
        self.written: dict[str, int] = {}  # per session, the highest durable seq written to the socket
        self.close_reason: str | None = None  # why the bridge ends this connection (slow_consumer, …)

    def resume_points(self) -> dict[str, int]:
        """Per subscribed session, the seq to resume from: the last durable event written out."""
        return {sid: self.written.get(sid, sub.start_seq) for sid, sub in self.subscriptions.items()}

    def end(self, reason: str) -> None:
        """Stop sending; the transport closes the connection with the code of `reason`."""
        if self.close_reason is None:
            self.close_reason = reason
        self.queue.close()

    def _durable(self, frame: str, key: tuple[str, int] | None = None) -> None:
        if key is not None and len(frame) > self.queue.limits.max_bytes // 2:
            # An event that could never fit the queue would close the client with 4429 on every resume,
            # forever: it goes out as a reference to the audit API instead (protocol.truncated_event).
            frame = truncated_event(frame)
            metrics.WS_EVENTS_TRUNCATED.inc()
        if not self.queue.offer_durable(frame, key) and self.queue.overflowed:
            self.end("slow_consumer")
            if self._on_overflow is not None:
                cb, self._on_overflow = self._on_overflow, None
                cb(self)


class Hub:
    def __init__(self, *, now: Callable[[], float] = time.monotonic,
                 on_subscribers: Callable[[str, int], None] | None = None,
                 wake: Callable[[str], None] = lambda _sid: None) -> None:
        self._subs: dict[str, dict[int, Subscription]] = {}
        # Told the number of local subscribers of a session whenever it changes (the supervisor keeps a
        # subscribed session warm and out of idle GC).
        self._on_subscribers = on_subscribers
        # Highest durable seq published to the live subscribers of a session (None: not known yet).
        self._published: dict[str, int] = {}
        self._wake = wake  # the feed's wake-up: a session needs a read of committed events (DurableFeed.wake)
        self._now = now
        self._log = structlog.get_logger("bridge.hub")

    # -- queries ----------------------------------------------------------------------------------------
    def sessions(self) -> list[str]:
        return list(self._subs)

    def has_subscribers(self, session_id: str) -> bool:
        return bool(self._subs.get(session_id))

    def published_seq(self, session_id: str) -> int | None:
        return self._published.get(session_id)

    def subscriber_count(self, session_id: str) -> int:
        return len(self._subs.get(session_id, {}))

    # -- subscriptions ------------------------------------------------------------------------------------
    def register(self, client: Client, session_id: str, after: int) -> Subscription:
        self.unregister(client, session_id)
        sub = Subscription(client, session_id, after, after)
        client.subscriptions[session_id] = sub
        self._subs.setdefault(session_id, {})[client.id] = sub
        metrics.WS_SUBSCRIPTIONS.inc()
        self._count_changed(session_id)
        return sub

    def _count_changed(self, session_id: str) -> None:
        if self._on_subscribers is not None:
            try:
                self._on_subscribers(session_id, self.subscriber_count(session_id))
            except Exception as e:  # never let bookkeeping break a subscription
                self._log.error("subscriber_count_callback_failed", session_id=session_id, error=str(e))

    def go_live(self, sub: Subscription, replayed_to: int) -> bool:
        """End of a replay that read everything up to `replayed_to`. Returns False if held traffic was
        dropped meanwhile (the caller reads the database again from `sub.sent_seq`, then retries)."""
        if sub.pending_overflowed:
            sub.pending.clear()
            sub.pending_overflowed = False
            return False
        held, sub.pending = sub.pending, []
        sub.replaying = False
        for item in held:
            self._deliver(sub, item)
        if self._published.get(sub.session_id) is None:
            # First subscriber of this session here: the feed starts from what the replay read; a commit
            # that raced with the end of the replay is picked up by the wake-up.
            self._published[sub.session_id] = replayed_to
            self._wake(sub.session_id)
        return True

    def unregister(self, client: Client, session_id: str) -> None:
        sub = client.subscriptions.pop(session_id, None)
        if sub is None:
            return
        metrics.WS_SUBSCRIPTIONS.dec()
        subs = self._subs.get(session_id)
        if subs is not None:
            subs.pop(client.id, None)
            if not subs:
                del self._subs[session_id]
                self._published.pop(session_id, None)
        self._count_changed(session_id)

    def remove_client(self, client: Client) -> None:
        for sid in list(client.subscriptions):
            self.unregister(client, sid)

    # -- publishing (synchronous, never blocks) -----------------------------------------------------------
    def publish_durable(self, session_id: str, events: Iterable[tuple[int, str]]) -> None:
        """Committed events of a session as (seq, serialized `event` message), in seq order."""
        subs = self._subs.get(session_id)
        if not subs:
            return
        top = self._published.get(session_id, -1)
        for seq, frame in events:
            if seq <= top:
                continue
            top = seq
            item = _Held(seq, frame)
            for sub in list(subs.values()):
                self._deliver(sub, item)
        self._published[session_id] = top

    def publish_delta(self, session_id: str, ev: ChatEvent) -> None:
        subs = self._subs.get(session_id)
        if not subs:
            return
        item = _Held(None, None, ev)
        for sub in list(subs.values()):
            self._deliver(sub, item)

    def publish_state(self, session_id: str, message: dict[str, object]) -> None:
        """A state message (permission, status): never dropped, not ordered by seq."""
        subs = self._subs.get(session_id)
        if not subs:
            return
        item = _Held(None, dumps(message))
        for sub in list(subs.values()):
            self._deliver(sub, item)

    def publish_status(self, session_id: str, status: str, reason: str | None, version: int) -> None:
        """A committed session status (the `bridge_status` notification of whichever process wrote it, or a
        re-read after the LISTEN connection came back). Sent to a subscriber only if newer than what it has."""
        subs = self._subs.get(session_id)
        if not subs:
            return
        item = _Held(None, dumps(status_message(session_id, status, reason)), status_version=version)
        for sub in list(subs.values()):
            self._deliver(sub, item)

    def erased(self, session_id: str) -> None:
        """The session was erased (docs/lifecycle.md, "Erasure"): each subscriber gets the final
        `{"type":"erased","session"}` frame, replaying or not, and the subscription ends here."""
        frame = dumps(erased_message(session_id))
        for sub in list(self._subs.get(session_id, {}).values()):
            sub.client._durable(frame)
            self.unregister(sub.client, session_id)

    def _deliver(self, sub: Subscription, item: _Held) -> None:
        if sub.replaying:
            if len(sub.pending) >= PENDING_MAX:
                sub.pending_overflowed = True
                sub.pending.clear()
            if not sub.pending_overflowed:
                sub.pending.append(item)
            return
        client = sub.client
        if item.status_version is not None:
            if item.status_version <= sub.status_version:
                return
            sub.status_version = item.status_version
        if item.delta is not None:
            frame = dumps(delta_message(sub.session_id, item.delta, sub.sent_seq))
            if not client.queue.offer_ephemeral(frame, self._now()):
                metrics.WS_DELTAS_DROPPED.inc()
            return
        key = None
        if item.seq is not None:
            if item.seq <= sub.sent_seq:
                return
            sub.sent_seq = item.seq
            key = (sub.session_id, item.seq)
        assert item.frame is not None
        client._durable(item.frame, key)
