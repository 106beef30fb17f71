"""The pending-requests table beyond permissions (docs/mirror.md, "Pending requests"): questions of the
`question` tool (docs/upstream.md §18), who answered a request through the bridge, and the pending
requests of every session for operators. The table is `chat_permission_requests` (its name predates
questions); permission rows are written by the fan-out (bridge.store.reads.feed) through the statements at
the end of this module, with `kind = 'permission'`.

Upstream keeps none of it in its sync log: this table is the only durable record of what was asked, what
was answered, by whom and when.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Insert, and_, func, literal, null, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events.question import QuestionUpdate
from bridge.store.payload import storable_json
from bridge.store.ports.pending import MAX_LIST as MAX_LIST  # re-exported: the port's
from bridge.store.ports.pending import StoredRequest as StoredRequest
from bridge.store.schema import chat_permission_requests, chat_sessions

P = chat_permission_requests.c
S = chat_sessions.c


_COLUMNS = (P.kind, P.session_id, P.request_id, P.runtime, P.asked, P.asked_at, P.reply, P.answer,
            P.answered_by, P.replied_at)


def _row(r: Any) -> StoredRequest:
    return StoredRequest(r.kind, r.session_id, r.request_id, r.runtime, r.asked, r.asked_at, r.reply, r.answer,
                         r.answered_by, r.replied_at)


class PendingStore:
    def __init__(self, engine: AsyncEngine, upstream: str, read_engine: AsyncEngine | None = None) -> None:
        self._engine = engine
        self._read = read_engine or engine
        self.upstream = upstream

    async def question(self, update: QuestionUpdate, at: datetime) -> None:
        """Record a question's new state; a second record of the same request keeps the first value of each
        column (another process, a reconnect), as for permissions (below)."""
        row: dict[str, Any] = {"upstream": self.upstream, "request_id": update.request_id, "kind": "question",
                               "session_id": update.session_id, "runtime": update.runtime}
        if update.settled:
            # no answers known: SQL NULL, not JSON null, so that the bridge's own answer can still fill it in
            row.update(reply=update.state, replied=storable_json(update.record).value, replied_at=at,
                       answer=null() if update.answers is None else update.answers)
            kept: tuple[str, ...] = ("reply", "replied", "replied_at", "answer")
        else:
            row.update(asked=storable_json(update.record).value, asked_at=at, call_id=update.call_id,
                       assistant_message_id=update.assistant_message_id)
            kept = ("asked", "asked_at", "call_id", "assistant_message_id")
        stmt = pg_insert(chat_permission_requests).values(**row)
        stmt = stmt.on_conflict_do_update(
            index_elements=[P.upstream, P.request_id],
            set_={**{k: func.coalesce(P[k], stmt.excluded[k]) for k in kept}, "updated_at": func.now()})
        async with self._engine.begin() as conn:
            await conn.execute(stmt)

    async def answered_by(self, request_id: str, subject: str, answer: Any = None) -> None:
        """The bridge command that answered the request: its token subject (and a question's answers, as
        sent). Only the first answer is kept."""
        values: dict[str, Any] = {"answered_by": func.coalesce(P.answered_by, subject), "updated_at": func.now()}
        if answer is not None:
            values["answer"] = func.coalesce(P.answer, literal(storable_json(answer).value, type_=JSONB))
        stmt = chat_permission_requests.update().where(
            and_(P.upstream == self.upstream, P.request_id == request_id)).values(**values)
        async with self._engine.begin() as conn:
            await conn.execute(stmt)

    async def get(self, request_id: str) -> StoredRequest | None:
        q = select(*_COLUMNS).where(and_(P.upstream == self.upstream, P.request_id == request_id))
        async with self._engine.connect() as conn:
            r = (await conn.execute(q)).first()
        return None if r is None else _row(r)

    async def questions(self, session_id: str) -> list[StoredRequest]:
        """Every question of the session, oldest first (sent to a new subscriber: pending ones to answer,
        settled ones with their outcome)."""
        q = (select(*_COLUMNS)
             .where(P.upstream == self.upstream, P.session_id == session_id, P.kind == "question")
             .order_by(P.asked_at.nulls_first(), P.request_id).limit(MAX_LIST))
        async with self._read.connect() as conn:
            return [_row(r) for r in await conn.execute(q)]

    async def session_requests(self, session_id: str, kind: str, runtime: str | None = None) -> dict[str, str | None]:
        """request id -> reply (None while pending) of the session's requests of one kind (and runtime)."""
        q = select(P.request_id, P.reply).where(P.upstream == self.upstream, P.session_id == session_id,
                                                P.kind == kind)
        if runtime is not None:
            q = q.where(P.runtime == runtime)
        async with self._read.connect() as conn:
            return {r.request_id: r.reply for r in await conn.execute(q)}

    async def pending(self, limit: int = MAX_LIST, runtime: str | None = None) -> list[StoredRequest]:
        """Every pending request of the upstream (of one runtime if given), oldest first."""
        q = select(*_COLUMNS).where(P.upstream == self.upstream, P.reply.is_(None))
        if runtime is not None:
            q = q.where(P.runtime == runtime)
        q = q.order_by(P.asked_at.nulls_last(), P.request_id).limit(limit)
        async with self._read.connect() as conn:
            return [_row(r) for r in await conn.execute(q)]

    async def directories(self, session_ids: set[str]) -> dict[str | None, set[str]]:
        """The sessions grouped by their directory (None: not known here)."""
        out: dict[str | None, set[str]] = {}
        if not session_ids:
            return out
        q = select(S.session_id, S.directory).where(S.upstream == self.upstream,
                                                    S.session_id.in_(sorted(session_ids)))
        async with self._read.connect() as conn:
            known = {r.session_id: r.directory for r in await conn.execute(q)}
        for sid in session_ids:
            out.setdefault(known.get(sid), set()).add(sid)
        return out

    async def sessions_of(self, request_ids: list[str]) -> dict[str, str]:
        """request id -> its session, for stored requests."""
        if not request_ids:
            return {}
        q = select(P.request_id, P.session_id).where(P.upstream == self.upstream, P.request_id.in_(request_ids))
        async with self._read.connect() as conn:
            return {r.request_id: r.session_id for r in await conn.execute(q)}


# --- permission requests as the fan-out records them (bridge.store.reads.feed) ---------------------------


def _upsert_permission(row: dict[str, Any], kept: tuple[str, ...]) -> Insert:
    """Insert the request, or fill in the columns `kept` that are still NULL: a second process (or a
    reconnect) may record the same request, and the first record of each column wins."""
    stmt = pg_insert(chat_permission_requests).values(**row)
    return stmt.on_conflict_do_update(
        index_elements=[P.upstream, P.request_id],
        set_={**{name: func.coalesce(P[name], stmt.excluded[name]) for name in kept}, "updated_at": func.now()},
    )


def upsert_permission_asked(row: dict[str, Any]) -> Insert:
    return _upsert_permission(row, ("asked", "asked_at", "action", "assistant_message_id", "call_id"))


def upsert_permission_replied(row: dict[str, Any]) -> Insert:
    return _upsert_permission(row, ("reply", "replied", "replied_at"))
