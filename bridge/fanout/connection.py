"""One WebSocket client's protocol state: authorizes and runs its ops against the hub (no sockets here;
`bridge.http.ws` moves frames between the socket and `Client.queue`)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from bridge.auth import Claims, VerifiedTokens, verify_token
from bridge.command_service import Outcome
from bridge.errors import AuthError, ProtocolError
from bridge.events.stored import stored_permission
from bridge.fanout import metrics
from bridge.fanout import protocol as p
from bridge.fanout.command_op import command_reply
from bridge.fanout.frames import stored_question_message
from bridge.fanout.hub import Client, Hub, Subscription
from bridge.fanout.limits import ConnectionSlots, OpLimits
from bridge.fanout.queue import QueueLimits
from bridge.fanout.read_queue import DEFAULT_MAX_WAITING, DEFAULT_PER_OWNER, ReadQueue, ReadQueueFull, busy_message
from bridge.fanout.replay_pages import replay
from bridge.fanout.shared_reads import SharedReads
from bridge.hosts import LOOPBACK_TRUSTED
from bridge.log import correlation_id
from bridge.revocation import never_revoked
from bridge.store.reads import FanoutStore


@dataclass
class WebSocketContext:
    """Everything a `/v1/ws` connection needs (hub, the fan-out's store, auth, limits), owned by the daemon."""

    hub: Hub
    store: FanoutStore
    upstream: str
    secret: str
    allowed_origins: frozenset[str] = frozenset()
    trusted_hosts: frozenset[str] = LOOPBACK_TRUSTED  # `Host`s a same-origin page may come from
    limits: QueueLimits = field(default_factory=QueueLimits)
    # Stored events read per replay query: larger pages cost fewer round trips (BENCHMARKS.md: replay of a
    # 20,000-event session 54k ev/s in pages of 500, 56k in 1,000); frames still wait for queue room one by one.
    replay_page: int = 1000
    warm: Callable[[str], object] = lambda _sid: None
    # Does the upstream have this session? Asked before a subscribe to an id the mirror does not know,
    # so that no follower and no `chat_sessions` row is ever made for an id nobody confirmed. None: no
    # upstream to ask (tests of the fan-out alone) — every well-formed id is taken.
    confirm: Callable[[str], Awaitable[bool]] | None = None
    now: Callable[[], float] = time.time
    # The `command` op (docs/commands.md): bridge.http.commands.CommandsContext.run; None: not offered.
    commands: Callable[..., Awaitable[Outcome]] | None = None
    # A new subscriber asks for a re-sync of the session's pending requests (bridge.fanout.resync): one
    # asked while the bridge was down is found then. None: no upstream (tests of the fan-out alone).
    resync_session: Callable[[str], None] | None = None
    # A session-limited token also grants its sessions' subagents (bridge.store.chat_sessions.tree.widen); None: as is.
    widen: Callable[[Claims, str], Awaitable[Claims]] | None = None

    # Whether a token's `jti` was revoked (bridge.revocation): checked at connect and while the socket is open.
    revoked: Callable[[str], bool] = never_revoked
    # WebSocket bounds (docs/security.md, "Floods"): ops per connection, connections per token and address.
    op_limits: OpLimits = field(default_factory=OpLimits)
    slots: ConnectionSlots = field(default_factory=ConnectionSlots)
    # Turns on the read pool for subscribes and `sessions` (bridge.fanout.read_queue): the pool's size less
    # one, which stays for the live feed; reads beyond wait their turn, fairly per token.
    read_slots: int = 3
    read_queue_max: int = DEFAULT_MAX_WAITING
    read_queue_per_owner: int = DEFAULT_PER_OWNER
    _reads: SharedReads | None = field(default=None, init=False, repr=False)
    # Tokens verified at an earlier connect (bridge.auth.VerifiedTokens): expiry and revocation checked each time.
    _verified: VerifiedTokens = field(default_factory=VerifiedTokens, init=False, repr=False)

    @property
    def reads(self) -> SharedReads:
        """The shared catch-up reads and their queue, made on first use (inside the running loop)."""
        if self._reads is None:
            queue = ReadQueue(self.read_slots, max_waiting=self.read_queue_max, per_owner=self.read_queue_per_owner)
            self._reads = SharedReads(self.store, queue, self.replay_page)
        return self._reads

    def authenticate(self, token: str | None) -> Claims:
        return verify_token(token, self.secret, self.upstream, now=self.now(), revoked=self.revoked,
                            cache=self._verified)


class Connection:
    def __init__(self, service: WebSocketContext, claims: Claims, client: Client) -> None:
        self._svc = service
        self.claims = claims
        self.client = client
        self._ops = service.op_limits.bucket()
        self._owner = claims.jti  # whose turn a read waits for (bridge.fanout.read_queue): every socket of a token
        self._log = structlog.get_logger("bridge.ws").bind(client=client.id, subject=claims.subject)

    def _send(self, message: dict[str, object]) -> None:
        self.client._durable(p.dumps(message))

    def hello(self) -> None:
        c = self.claims
        self._send(p.hello_message(self._svc.upstream, sorted(c.sessions) if c.sessions is not None else None,
                                   None if math.isinf(c.expires_at) else c.expires_at, c.scope, c.approve))

    def expired(self) -> bool:
        return self.claims.expires_at <= self._svc.now()

    async def _admit_op(self) -> None:
        """Wait until this connection's op bucket has a token (bridge.fanout.limits); told once per flood."""
        while (wait := self._ops.take()) > 0:
            metrics.WS_THROTTLED.inc()
            if not self._ops.throttled:
                self._ops.throttled = True
                self._log.warning("ws_ops_throttled")
                rate = self._svc.op_limits.rate_per_s
                self._send(p.error_message(p.ERR_RATE_LIMITED, f"too many ops: this connection's ops are held "
                                           f"back to {rate:g} a second; slow down", retry_after=round(wait, 3)))
            await asyncio.sleep(wait)  # a deadline (the bucket's refill), not a condition

    async def handle_text(self, text: str) -> None:
        await self._admit_op()
        try:
            op = p.parse_client_message(text)
        except ProtocolError as e:
            metrics.WS_BAD_MESSAGES.labels(reason=e.reason).inc()
            self._send(p.error_message(e.code, e.message, e.ref))
            return
        if isinstance(op, p.Ping):
            self._send(p.pong_message(op.ref))
        elif isinstance(op, p.ListSessions):
            try:
                scope = self.claims.sessions
                if op.parent is not None:  # the parent's subagents' sessions, granted with it
                    if self._svc.widen is not None and not self.claims.allows(op.parent):
                        self.claims = await self._svc.widen(self.claims, op.parent)
                    self.claims.require(op.parent)
                    scope = await self._svc.store.children(op.parent)
                listed, nxt = await self._svc.reads.run_alone(
                    self._owner, lambda: self._svc.store.session_list(op.limit, op.cursor, scope))
            except ReadQueueFull as e:
                self._send(busy_message(e.retry_after_s, op.ref))
                return
            except ValueError:
                self._send(p.error_message(p.ERR_BAD_MESSAGE, "next is not a cursor of a sessions reply", op.ref))
                return
            except AuthError as e:
                self._send(p.error_message(p.ERR_FORBIDDEN, str(e), op.ref, op.parent))
                return
            except Exception as e:
                ref = correlation_id()
                self._log.error("ws_sessions_failed", correlation_id=ref, error=f"{type(e).__name__}: {e}")
                self._send(p.error_message(p.ERR_INTERNAL, f"listing failed, retry later (correlation id {ref})",
                                           op.ref, correlation_id=ref))
                return
            self._send(p.sessions_message(listed, op.ref, nxt))
        elif isinstance(op, p.CommandOp):
            self._send(await command_reply(self._svc.commands, self.claims, self.expired, op, self._log))
        elif isinstance(op, p.Unsubscribe):
            if op.session not in self.client.subscriptions:
                self._send(p.error_message(p.ERR_NOT_SUBSCRIBED, "not subscribed", op.ref, op.session))
                return
            self._svc.hub.unregister(self.client, op.session)
            self._send(p.unsubscribed_message(op.session, op.ref))
        else:
            try:
                await self.subscribe(op)
            except ReadQueueFull as e:  # the only refusal of a storm: the queue of reads itself is full
                self._svc.hub.unregister(self.client, op.session)
                self._send(busy_message(e.retry_after_s, op.ref, op.session))
            except Exception as e:  # the database is away: say so, keep the connection
                ref = correlation_id()
                self._log.error("ws_subscribe_failed", session_id=op.session, correlation_id=ref,
                                error=f"{type(e).__name__}: {e}")
                self._svc.hub.unregister(self.client, op.session)
                self._send(p.error_message(p.ERR_INTERNAL, f"subscribe failed, retry later (correlation id {ref})",
                                           op.ref, op.session, correlation_id=ref))

    async def subscribe(self, op: p.Subscribe) -> None:
        sid = op.session
        if self.expired():  # the close follows from the expiry timer; never serve past expiry
            self._send(p.error_message(p.ERR_TOKEN_EXPIRED, "token expired", op.ref, sid))
            return
        try:
            if self._svc.widen is not None and not self.claims.allows(sid):
                self.claims = await self._svc.widen(self.claims, sid)
            self.claims.require(sid)
        except AuthError as e:
            metrics.WS_REFUSED.labels(reason=e.code).inc()
            self._send(p.error_message(p.ERR_FORBIDDEN, str(e), op.ref, sid))
            return
        if sid not in self.client.subscriptions and len(self.client.subscriptions) >= p.MAX_SUBSCRIPTIONS:
            self._send(p.error_message(p.ERR_TOO_MANY, f"at most {p.MAX_SUBSCRIPTIONS} subscriptions", op.ref, sid))
            return
        exists = await self._exists(sid)
        if exists is None:  # erased (docs/lifecycle.md, "Erasure"): nothing to subscribe to, ever
            self._send(p.erased_message(sid, op.ref))
            return
        if not exists:
            metrics.WS_REFUSED.labels(reason=p.ERR_UNKNOWN_SESSION).inc()
            self._send(p.error_message(p.ERR_UNKNOWN_SESSION, "no such session upstream", op.ref, sid))
            return
        self._svc.warm(sid)
        after = -1 if op.after is None else op.after
        # Registered before the head is read: a status committed meanwhile is held for this subscription
        # and sent after `subscribed` if it is newer than the head's (Subscription.status_version).
        sub = self._svc.hub.register(self.client, sid, after)
        head = await self._svc.reads.head(self._owner, sid)
        if self.client.subscriptions.get(sid) is not sub:
            return
        # A session not stored yet: head -1, no status, nothing known missing.
        cursor, status = (-1, None) if head is None else (head.cursor_seq, head.status)
        sub.status_version = max(sub.status_version, 0 if head is None else head.status_version)
        # complete: every stored event after `after` is about to be sent; false when the bridge knows its
        # history of the session has a hole, or the client claims a seq beyond anything stored.
        incomplete = head is not None and head.incomplete
        complete = not incomplete and (op.after is None or op.after <= max(cursor, 0))
        title, parent = (None, None) if head is None else (head.title, head.parent_id)
        self._send(p.subscribed_message(sid, op.after, cursor, complete, status, op.ref, title, parent))
        self._log.info("ws_subscribed", session_id=sid, after=op.after, head=cursor)
        if not await self._replay(sub, cursor):
            return
        self._send(p.caught_up_message(sid, sub.sent_seq))
        requests = await self._svc.reads.requests(self._owner, sid)
        for record in requests.permissions:
            if self.client.subscriptions.get(sid) is not sub:
                return
            update = stored_permission(sid, record)
            if update is not None:
                self._send(p.permission_message(sid, update))
        # Every question of the session: pending ones to answer, settled ones with their outcome.
        for row in requests.questions:
            if self.client.subscriptions.get(sid) is not sub:
                return
            self._send(stored_question_message(row))
        if self._svc.resync_session is not None:
            self._svc.resync_session(sid)

    async def _exists(self, sid: str) -> bool | None:
        """Stored here already, or confirmed by the upstream (docs/websocket.md, `unknown_session`); None:
        erased from the mirror (asked only of a session with no stored row)."""
        if await self._svc.reads.head(self._owner, sid) is not None:
            return True
        if await self._svc.store.erased(sid):
            return None
        if self._svc.confirm is None:
            return True
        try:
            return await self._svc.confirm(sid)
        except Exception:
            # No answer in time (a serve bootstrapping the session's directory can take longer than the
            # confirm's timeout): stored meanwhile by its follower (`session.created`) is known too.
            if await self._svc.reads.head(self._owner, sid) is not None:
                return True
            raise

    async def _replay(self, sub: Subscription, head: int) -> bool:
        """Stored events with seq > sub.sent_seq, then live; False if the subscription ended meanwhile."""
        return await replay(self._svc.reads, self._svc.hub, self._owner, self.client, sub, head)

    def close(self) -> None:
        self._svc.hub.remove_client(self.client)
