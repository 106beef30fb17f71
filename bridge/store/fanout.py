"""SQL of the WebSocket fan-out (docs/websocket.md): replay reads by seq, commit notifications, permission requests.

Commit notifications: `write_batch` runs `notify_committed()` inside its transaction; PostgreSQL delivers a
NOTIFY only when (and if) that transaction commits, in commit order, to every `LISTEN bridge_events`
connection of every bridge process. The payload is `<upstream>|<session>|<max seq of the batch>`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, Select, TextClause, and_, bindparam, func, or_, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.payload import storable_json
from bridge.store.schema import chat_session_events, chat_sessions
from bridge.store.schema_fanout import chat_permission_requests

NOTIFY_CHANNEL = "bridge_events"
# Status writes (bridge.store.leases.LeaseStore.set_status, EventStore.mark_deleted) notify here, in the
# writing transaction: every process pushes the status to its own subscribers (docs/websocket.md).
STATUS_CHANNEL = "bridge_status"
_REASON_MAX = 1000  # a NOTIFY payload must stay under 8000 bytes

E = chat_session_events.c
S = chat_sessions.c
P = chat_permission_requests.c


@dataclass(frozen=True)
class CommitNotice:
    upstream: str
    session_id: str
    max_seq: int


def notice_payload(upstream: str, session_id: str, max_seq: int) -> str:
    return f"{upstream}|{session_id}|{max_seq}"


def parse_notice(payload: str) -> CommitNotice | None:
    """The inverse of `notice_payload`; None for a payload that is not ours. The upstream name may
    itself hold `|` (it is configurable), session ids and seqs do not."""
    parts = payload.rsplit("|", 2)
    if len(parts) != 3 or not parts[1] or not parts[2].isdigit():
        return None
    return CommitNotice(parts[0], parts[1], int(parts[2]))


@dataclass(frozen=True)
class StatusNotice:
    upstream: str
    session_id: str
    status: str
    reason: str | None
    version: int


def status_payload(upstream: str, session_id: str, status: str, reason: str | None, version: int) -> str:
    if reason is not None and len(reason) > _REASON_MAX:
        reason = reason[: _REASON_MAX - 1] + "…"
    return json.dumps({"upstream": upstream, "session": session_id, "status": status, "reason": reason,
                       "version": version}, separators=(",", ":"), ensure_ascii=False)


def parse_status_notice(payload: str) -> StatusNotice | None:
    """The inverse of `status_payload`; None for anything else (never raises)."""
    try:
        d = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(d, dict):
        return None
    upstream, sid, status, reason, version = (d.get(k) for k in ("upstream", "session", "status", "reason",
                                                                  "version"))
    if not (isinstance(upstream, str) and isinstance(sid, str) and sid and isinstance(status, str) and status):
        return None
    if reason is not None and not isinstance(reason, str):
        return None
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        return None
    return StatusNotice(upstream, sid, status, reason, version)


# --- statements --------------------------------------------------------------------------------------


def notify_committed(upstream: str, session_id: str, max_seq: int) -> TextClause:
    return text("SELECT pg_notify(:channel, :payload)").bindparams(
        bindparam("channel", NOTIFY_CHANNEL), bindparam("payload", notice_payload(upstream, session_id, max_seq))
    )


def notify_status(upstream: str, session_id: str, status: str, reason: str | None, version: int) -> TextClause:
    """Run inside the transaction that wrote the status: delivered only if (and when) it commits."""
    return text("SELECT pg_notify(:channel, :payload)").bindparams(
        bindparam("channel", STATUS_CHANNEL),
        bindparam("payload", status_payload(upstream, session_id, status, reason, version)),
    )


def select_events_after(upstream: str, session_id: str, after: int, limit: int) -> Select[Any]:
    return (
        select(E.seq, E.payload, E.kind)
        .where(E.upstream == upstream, E.session_id == session_id, E.seq > after)
        .order_by(E.seq)
        .limit(limit)
    )


def select_session_head(upstream: str, session_id: str) -> Select[Any]:
    return select(S.cursor_seq, S.status, S.status_reason, S.status_version, S.incomplete, S.deleted).where(
        S.upstream == upstream, S.session_id == session_id
    )


def select_session_list(upstream: str, limit: int, after: tuple[datetime | None, str] | None = None,
                        scope: frozenset[str] | None = None) -> Select[Any]:
    """One page, most recently active first (never-active last), keyset `after` = the last row's
    (last_event_at, session_id); `scope`: only these ids (a session-scoped token)."""
    conds: list[Any] = [S.upstream == upstream, S.deleted.is_(False)]
    if scope is not None:
        conds.append(S.session_id.in_(sorted(scope)))
    if after is not None:
        at, sid = after
        if at is None:
            conds.append(and_(S.last_event_at.is_(None), S.session_id > sid))
        else:
            conds.append(or_(S.last_event_at < at, and_(S.last_event_at == at, S.session_id > sid),
                             S.last_event_at.is_(None)))
    return (
        select(S.session_id, S.cursor_seq, S.status, S.last_event_at)
        .where(*conds)
        .order_by(S.last_event_at.desc().nulls_last(), S.session_id)
        .limit(limit)
    )


def session_cursor(last_event_at: datetime | None, session_id: str) -> str:
    return f"{'' if last_event_at is None else last_event_at.isoformat()}|{session_id}"


def parse_session_cursor(cursor: str) -> tuple[datetime | None, str]:
    """The inverse of `session_cursor`; ValueError for anything else."""
    at, sep, sid = cursor.rpartition("|")
    if not sep or not sid or "\x00" in sid:
        raise ValueError("not a sessions cursor")
    if not at:
        return None, sid
    t = datetime.fromisoformat(at)
    if t.tzinfo is None:
        raise ValueError("not a sessions cursor")
    return t, sid


def upsert_permission_asked(row: dict[str, Any]) -> Insert:
    stmt = pg_insert(chat_permission_requests).values(**row)
    # A second process (or a reconnect) may record the same request: the first record wins.
    return stmt.on_conflict_do_update(
        index_elements=[P.upstream, P.request_id],
        set_={
            "asked": func.coalesce(P.asked, stmt.excluded.asked),
            "asked_at": func.coalesce(P.asked_at, stmt.excluded.asked_at),
            "action": func.coalesce(P.action, stmt.excluded.action),
            "assistant_message_id": func.coalesce(P.assistant_message_id, stmt.excluded.assistant_message_id),
            "call_id": func.coalesce(P.call_id, stmt.excluded.call_id),
            "updated_at": func.now(),
        },
    )


def upsert_permission_replied(row: dict[str, Any]) -> Insert:
    stmt = pg_insert(chat_permission_requests).values(**row)
    return stmt.on_conflict_do_update(
        index_elements=[P.upstream, P.request_id],
        set_={
            "reply": func.coalesce(P.reply, stmt.excluded.reply),
            "replied": func.coalesce(P.replied, stmt.excluded.replied),
            "replied_at": func.coalesce(P.replied_at, stmt.excluded.replied_at),
            "updated_at": func.now(),
        },
    )


def select_pending_permissions(upstream: str, session_id: str) -> Select[Any]:
    return (
        select(P.request_id, P.asked)
        .where(P.upstream == upstream, P.session_id == session_id, P.reply.is_(None), P.asked.is_not(None))
        .order_by(P.asked_at, P.request_id)
    )


def select_session_permissions(upstream: str, session_id: str, runtime: str | None = None) -> Select[Any]:
    stmt = select(P.request_id, P.reply).where(P.upstream == upstream, P.session_id == session_id)
    return stmt if runtime is None else stmt.where(P.runtime == runtime)


# --- the store ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionHead:
    known: bool
    cursor_seq: int
    status: str | None
    status_reason: str | None
    incomplete: bool
    deleted: bool
    status_version: int = 0


class FanoutStore:
    """Reads and writes of the fan-out, for one upstream."""

    def __init__(self, engine: AsyncEngine, upstream: str, read_engine: AsyncEngine | None = None) -> None:
        self._engine = engine
        # Replay and session reads: the bounded read pool when given (bridge.store.db.make_read_engine).
        self._read = read_engine or engine
        self.upstream = upstream

    async def events_after(self, session_id: str, after: int,
                           limit: int) -> list[tuple[int, dict[str, Any], str | None]]:
        """Stored rows `(seq, envelope, kind)` with seq > after, in seq order, at most `limit` (the kind of a
        legacy row is not in its payload: docs/legacy.md)."""
        async with self._read.connect() as conn:
            rows = await conn.execute(select_events_after(self.upstream, session_id, after, limit))
            return [(int(r.seq), r.payload, r.kind) for r in rows]

    async def head(self, session_id: str) -> SessionHead:
        async with self._read.connect() as conn:
            r = (await conn.execute(select_session_head(self.upstream, session_id))).one_or_none()
        if r is None:
            return SessionHead(False, -1, None, None, False, False)
        return SessionHead(True, int(r.cursor_seq), r.status, r.status_reason, bool(r.incomplete), bool(r.deleted),
                           int(r.status_version))

    async def session_list(self, limit: int = 100, cursor: str | None = None,
                           scope: frozenset[str] | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the upstream's sessions (not deleted), most recently active first, and the cursor of
        the next page (None: last page). ValueError for a cursor this did not make."""
        after = None if cursor is None else parse_session_cursor(cursor)
        async with self._read.connect() as conn:
            rows = (await conn.execute(select_session_list(self.upstream, limit, after, scope))).all()
        page = [{"session": r.session_id, "head": int(r.cursor_seq), "status": r.status,
                 "last_event_at": None if r.last_event_at is None else r.last_event_at.isoformat()}
                for r in rows]
        nxt = session_cursor(rows[-1].last_event_at, rows[-1].session_id) if len(rows) == limit else None
        return page, nxt

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
            rows = await conn.execute(select_pending_permissions(self.upstream, session_id))
            return [r.asked for r in rows]

    async def permission_replies(self, session_id: str, runtime: str | None = None) -> dict[str, str | None]:
        """Every stored request of the session (of one runtime if given): request id -> its reply (None
        while pending)."""
        async with self._read.connect() as conn:
            rows = await conn.execute(select_session_permissions(self.upstream, session_id, runtime))
            return {r.request_id: r.reply for r in rows}
