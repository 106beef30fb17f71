"""The WebSocket fan-out's store (docs/websocket.md): `FanoutStore` runs the feed's reads
(bridge.store.reads.queries, bridge.store.reads.replay) on the read pool, and records permission requests
(statements of bridge.store.commands_pending.pending). The NOTIFY channels it listens to are
bridge.store.notices'.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

import bridge.store.reads.batch as batch
import bridge.store.reads.queries as reads
from bridge import metrics
from bridge.store.chat_sessions import reader, tree
from bridge.store.codecs import SessionRow, parse_session_cursor, session_cursor, session_list_entry, session_row
from bridge.store.commands_pending.pending import (
    PendingStore,
    StoredRequest,
    upsert_permission_asked,
    upsert_permission_replied,
)
from bridge.store.lifecycle import is_tombstoned
from bridge.store.payload import storable_json
from bridge.store.reads.replay import StoredFrame, frames_after

_log = structlog.get_logger("bridge.fanout.store")


class FanoutStore:
    """Reads and writes of the fan-out, for one upstream."""

    def __init__(self, engine: AsyncEngine, upstream: str, read_engine: AsyncEngine | None = None,
                 standby_engine: AsyncEngine | None = None) -> None:
        self._engine = engine
        # Replay and session reads: the bounded read pool when given (bridge.store.db.make_read_engine).
        self._read = read_engine or engine
        # BRIDGE_READ_DATABASE_URL: the bulk of a replay and the session list read there; the live feed,
        # heads and the end of every replay read the primary (docs/scaling.md, "Reads on a standby").
        self._standby = standby_engine
        self.upstream = upstream

    @property
    def has_standby(self) -> bool:
        return self._standby is not None

    def pending_store(self) -> PendingStore:
        """The pending-requests table's other reads and writes (questions, who answered), same engines."""
        return PendingStore(self._engine, self.upstream, self._read)

    async def replay_frames_after(self, session_id: str, after: int, limit: int) -> list[StoredFrame]:
        """`frames_after` for a subscription's replay: from the standby if there is one, and whatever it
        does not have yet (replication lag) from the primary in the same page. A page shorter than `limit`
        therefore means the primary has nothing more: "caught up" is never said with less than the
        primary committed."""
        if self._standby is None:
            return await self.frames_after(session_id, after, limit)
        try:
            rows = await frames_after(self._standby, self.upstream, session_id, after, limit)
        except (DBAPIError, OSError, TimeoutError) as e:  # the standby is away: the primary serves it all
            metrics.STANDBY_FALLBACKS.inc()
            _log.warning("standby_read_failed", session_id=session_id, error=f"{type(e).__name__}: {e}"[:300])
            return await self.frames_after(session_id, after, limit)
        metrics.STANDBY_ROWS.inc(len(rows))
        if len(rows) < limit:
            top = rows[-1][0] if rows else after
            rows += await frames_after(self._read, self.upstream, session_id, top, limit - len(rows))
        return rows

    async def events_after(self, session_id: str, after: int,
                           limit: int) -> list[tuple[int, dict[str, Any], str | None]]:
        """Stored rows `(seq, envelope, kind)` with seq > after, in seq order, at most `limit` (the kind of a
        legacy row is not in its payload: docs/legacy.md)."""
        async with self._read.connect() as conn:
            rows = await conn.execute(reads.select_events_after(self.upstream, session_id, after, limit))
            return [(int(r.seq), r.payload, r.kind) for r in rows]

    async def frames_after(self, session_id: str, after: int, limit: int) -> list[StoredFrame]:
        """`events_after` for the WebSocket: a v2 row as its frame, built by PostgreSQL (bridge.store.reads.replay)."""
        return await frames_after(self._read, self.upstream, session_id, after, limit)

    async def frames_after_many(self, wanted: list[tuple[str, int]], limit: int) -> list[list[StoredFrame]]:
        """`frames_after` of many (session, after) in one statement, in order (bridge.store.reads.batch)."""
        return await batch.frames_after_many(self._read, self.upstream, wanted, limit)

    async def requests(self, session_ids: list[str]) -> dict[str, tuple[list[dict[str, Any]], list[StoredRequest]]]:
        """`pending_permissions` and the questions of many sessions in one statement."""
        return await batch.requests(self._read, self.upstream, session_ids)

    async def heads(self, session_ids: list[str]) -> dict[str, SessionRow]:
        """`head` of many sessions in one statement; one not stored is absent."""
        return await batch.heads(self._read, self.upstream, session_ids)

    async def erased(self, session_id: str) -> bool:
        """The session was erased (bridge.store.lifecycle): asked only of a session with no stored row."""
        async with self._read.connect() as conn:
            return await is_tombstoned(conn, self.upstream, session_id)

    async def head(self, session_id: str) -> SessionRow | None:
        """The session's cursor, status (and its version), `incomplete` and `deleted`; None: not stored."""
        async with self._read.connect() as conn:
            return await reader.read_session(conn, self.upstream, session_id)

    async def children(self, session_id: str) -> frozenset[str]:
        """The subagents' sessions of `session_id` (bridge.store.chat_sessions.tree)."""
        async with self._read.connect() as conn:
            return frozenset(await tree.children(conn, self.upstream, session_id))

    async def session_list(self, limit: int = 100, cursor: str | None = None,
                           scope: frozenset[str] | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the upstream's sessions (not deleted), most recently active first, and the cursor of
        the next page (None: last page). ValueError for a cursor this did not make."""
        after = None if cursor is None else parse_session_cursor(cursor)
        async with (self._standby or self._read).connect() as conn:
            stmt = reader.select_session_list(self.upstream, limit, after, scope)
            rows = [session_row(r) for r in await conn.execute(stmt)]
        nxt = session_cursor(rows[-1].last_event_at, rows[-1].session_id) if len(rows) == limit else None
        return [session_list_entry(r) for r in rows], nxt

    async def permission_asked(self, session_id: str, request_id: str, envelope: dict[str, Any],
                               at: datetime, action: str | None, assistant_message_id: str | None,
                               call_id: str | None, runtime: str = "v2") -> None:
        """Record a request as asked; `runtime` (`v2` | `legacy`) says which endpoint answers it."""
        row = {"upstream": self.upstream, "request_id": request_id, "session_id": session_id,
               "asked": storable_json(envelope).value, "asked_at": at, "action": action,
               "assistant_message_id": assistant_message_id, "call_id": call_id, "runtime": runtime}
        async with self._engine.begin() as conn:
            await conn.execute(upsert_permission_asked(row))

    async def permission_replied(self, session_id: str, request_id: str, envelope: dict[str, Any],
                                 at: datetime, reply: str | None) -> None:
        row = {"upstream": self.upstream, "request_id": request_id, "session_id": session_id,
               "reply": reply or "unknown", "replied": storable_json(envelope).value, "replied_at": at}
        async with self._engine.begin() as conn:
            await conn.execute(upsert_permission_replied(row))

    async def pending_permissions(self, session_id: str) -> list[dict[str, Any]]:
        """The `permission.v2.asked` envelopes of the session's requests that have no reply yet."""
        async with self._read.connect() as conn:
            rows = await conn.execute(reads.select_pending_permissions(self.upstream, session_id))
            return [r.asked for r in rows]

    async def permission_replies(self, session_id: str, runtime: str | None = None) -> dict[str, str | None]:
        """Every stored request of the session (of one runtime if given): request id -> its reply (None
        while pending)."""
        async with self._read.connect() as conn:
            rows = await conn.execute(reads.select_session_permissions(self.upstream, session_id, runtime))
            return {r.request_id: r.reply for r in rows}
