"""SQL of the audit (docs/audit.md): the hash chain at write time, and the read-only audit queries (API, CLI, export).

Views for auditors (`audit_prompts`, `audit_tool_calls`, `audit_texts`, `audit_steps`) cover both runtimes
since migration 0008 (`migrations/versions/0008_views_both_runtimes.py` holds their definition, docs/audit.md).
`VIEWS` below is what migration 0004 created from it, kept unchanged for that migration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Select, and_, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.audit.chain import GENESIS, ChainRow
from bridge.store.schema import chat_session_events, chat_sessions
from bridge.store.schema_commands import chat_commands

E = chat_session_events.c
S = chat_sessions.c
C = chat_commands.c

# Who asked for the turn a tool call belongs to: the subject of the bridge command behind the newest prompt
# taken into the loop before the call (NULL when that prompt did not come through the bridge;
# docs/commands.md). chat_commands.upstream_id is the prompt's message id.
_ASKED_BY = """(
    SELECT c.subject FROM chat_session_events p
    LEFT JOIN chat_commands c ON c.upstream = p.upstream AND c.session_id = p.session_id
        AND c.command = 'prompt' AND c.upstream_id = p.message_id
    WHERE p.upstream = t.upstream AND p.session_id = t.session_id AND p.kind = 'prompt:started'
      AND p.seq < t.called_seq
    ORDER BY p.seq DESC LIMIT 1
)"""

# --- views as of migration 0004 (executed by migrations/versions/0004_audit.py; 0008 replaces them) ----

VIEWS: dict[str, str] = {
    "audit_prompts": """
SELECT a.upstream, a.session_id, a.message_id,
       a.payload->'data'->'prompt'->>'text' AS text,
       a.delivery,
       a.seq AS admitted_seq, a.event_time AS admitted_at,
       p.seq AS started_seq, p.event_time AS started_at
FROM chat_session_events a
LEFT JOIN LATERAL (
    SELECT s.seq, s.event_time FROM chat_session_events s
    WHERE s.upstream = a.upstream AND s.session_id = a.session_id AND s.kind = 'prompt:started'
      AND s.message_id = a.message_id
    ORDER BY s.seq LIMIT 1
) p ON true
WHERE a.kind = 'prompt:admitted'
""",
    "audit_tool_calls": """
SELECT c.upstream, c.session_id, c.call_id, c.tool_name AS tool,
       c.payload->'data'->'input' AS input,
       c.assistant_message_id,
       c.seq AS called_seq, c.event_time AS called_at,
       CASE r.kind WHEN 'tool:success' THEN 'success' WHEN 'tool:fail' THEN 'failed' ELSE 'pending' END
           AS outcome,
       COALESCE(
           CASE WHEN jsonb_typeof(r.payload->'data'->'content') = 'array' THEN
               (SELECT string_agg(x->>'text', '' ORDER BY n)
                FROM jsonb_array_elements(r.payload->'data'->'content') WITH ORDINALITY AS t(x, n)
                WHERE x->>'type' = 'text')
           END,
           -- tools without text parts (read) return their output in structured.content
           CASE WHEN jsonb_typeof(r.payload->'data'->'structured'->'content') = 'string'
                THEN r.payload->'data'->'structured'->>'content' END
       ) AS output_text,
       r.payload->'data'->'content' AS output,
       r.payload->'data'->'structured' AS structured,
       r.error_type, r.error_message,
       r.seq AS finished_seq, r.event_time AS finished_at
FROM chat_session_events c
LEFT JOIN LATERAL (
    SELECT f.kind, f.payload, f.error_type, f.error_message, f.seq, f.event_time
    FROM chat_session_events f
    WHERE f.upstream = c.upstream AND f.session_id = c.session_id AND f.call_id = c.call_id
      AND f.kind IN ('tool:success', 'tool:fail') AND f.seq > c.seq
    ORDER BY f.seq LIMIT 1
) r ON true
WHERE c.kind = 'tool:start'
""",
    "audit_texts": """
SELECT t.upstream, t.session_id, t.assistant_message_id, t.part_id,
       CASE t.kind WHEN 'text:end' THEN 'text' ELSE 'reasoning' END AS part,
       t.payload->'data'->>'text' AS text,
       t.seq, t.event_time
FROM chat_session_events t
WHERE t.kind IN ('text:end', 'reasoning:end')
""",
}


# --- hash chain (inside write_batch's transaction) --------------------------------------------------


async def chain_new_events(conn: AsyncConnection, upstream: str, session_id: str, seqs: Sequence[int]) -> None:
    """Set `chain_hash` on the rows just inserted, in one statement (one round trip). write_batch holds
    the session row lock, so no other writer extends this session's chain concurrently. PostgreSQL
    computes exactly `bridge.audit.chain.link` over the payload as stored (`payload::text`); the
    verifier recomputes it in Python (tests/integration/test_audit_store.py checks they agree)."""
    if seqs:
        await conn.execute(_CHAIN_NEW_EVENTS, {"u": upstream, "s": session_id, "seqs": list(seqs),
                                               "genesis": GENESIS})


# link(prev, seq, event_id, payload_text) = sha256(prev "\n" seq "\n" event_id "\n" payload_text), hex.
_CHAIN_NEW_EVENTS = text("""
WITH RECURSIVE
fresh AS (
    SELECT seq, event_id, payload::text AS payload_text, row_number() OVER (ORDER BY seq) AS n
    FROM chat_session_events
    WHERE upstream = :u AND session_id = :s AND seq = ANY(CAST(:seqs AS bigint[]))
),
before AS (
    SELECT chain_hash FROM chat_session_events
    WHERE upstream = :u AND session_id = :s AND seq < (SELECT min(seq) FROM fresh)
    ORDER BY seq DESC LIMIT 1
),
chain (n, seq, h) AS (
    SELECT f.n, f.seq, encode(sha256(convert_to(
        coalesce((SELECT chain_hash FROM before), :genesis) || E'\n' || f.seq || E'\n' || f.event_id
        || E'\n' || f.payload_text, 'UTF8')), 'hex')
    FROM fresh f WHERE f.n = 1
    UNION ALL
    SELECT f.n, f.seq, encode(sha256(convert_to(
        c.h || E'\n' || f.seq || E'\n' || f.event_id || E'\n' || f.payload_text, 'UTF8')), 'hex')
    FROM chain c JOIN fresh f ON f.n = c.n + 1
)
UPDATE chat_session_events e SET chain_hash = chain.h
FROM chain
WHERE e.upstream = :u AND e.session_id = :s AND e.seq = chain.seq
""").bindparams(bindparam("seqs", type_=ARRAY(BigInteger)))


# --- reads ------------------------------------------------------------------------------------------

# Events stored of the session (the viewer's session list): a count over the primary-key index.
EVENT_COUNT = (
    select(func.count()).select_from(chat_session_events)
    .where(E.upstream == S.upstream, E.session_id == S.session_id)
    .correlate(chat_sessions).scalar_subquery().label("event_count")
)
SESSION_FIELDS = (
    S.session_id, S.directory, S.status, S.status_reason, S.cursor_seq, S.first_event_at, S.last_event_at,
    S.deleted, S.deleted_at, S.incomplete, S.created_at, S.updated_at, EVENT_COUNT,
)
EVENT_FIELDS = (
    E.seq, E.event_id, E.type, E.kind, E.event_time, E.received_at, E.stored_at, E.message_id,
    E.assistant_message_id, E.part_id, E.call_id, E.tool_name, E.error_type, E.error_message, E.finish,
    E.delivery, E.agent, E.model_id, E.provider_id, E.payload, E.payload_lossy, E.chain_hash,
)


@dataclass(frozen=True)
class SessionFilter:
    status: str | None = None
    since: datetime | None = None  # sessions with an event at or after
    until: datetime | None = None  # sessions with an event before
    after: str | None = None  # keyset cursor: session ids greater than this
    sessions: frozenset[str] | None = None  # restrict to these (token scope)
    limit: int = 100


@dataclass(frozen=True)
class ToolCallFilter:
    tool: str | None = None
    session: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    after: tuple[str, int] | None = None  # keyset cursor (session_id, called_seq)
    sessions: frozenset[str] | None = None
    limit: int = 100


def select_sessions_page(upstream: str, f: SessionFilter) -> Select[Any]:
    conds = [S.upstream == upstream]
    if f.status:
        conds.append(S.status == f.status)
    if f.since:
        conds.append(S.last_event_at >= f.since)
    if f.until:
        conds.append(S.first_event_at < f.until)
    if f.after:
        conds.append(S.session_id > f.after)
    if f.sessions is not None:
        conds.append(S.session_id.in_(sorted(f.sessions)))
    return select(*SESSION_FIELDS).where(and_(*conds)).order_by(S.session_id).limit(f.limit)


def _dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


class AuditReader:
    """Read-only queries of one upstream's mirror."""

    def __init__(self, engine: AsyncEngine, upstream: str) -> None:
        self._engine = engine
        self.upstream = upstream

    async def sessions(self, f: SessionFilter) -> list[dict[str, Any]]:
        async with self._engine.connect() as conn:
            return [_dict(r) for r in await conn.execute(select_sessions_page(self.upstream, f))]

    async def session(self, session_id: str) -> dict[str, Any] | None:
        stmt = select(*SESSION_FIELDS).where(S.upstream == self.upstream, S.session_id == session_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        return None if row is None else _dict(row)

    async def events(self, session_id: str, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        stmt = (
            select(*EVENT_FIELDS)
            .where(E.upstream == self.upstream, E.session_id == session_id, E.seq > after)
            .order_by(E.seq)
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [_dict(r) for r in await conn.execute(stmt)]

    async def all_events(self, session_id: str, page: int = 1000) -> AsyncIterator[dict[str, Any]]:
        after = 0
        while True:
            rows = await self.events(session_id, after, page)
            for r in rows:
                yield r
            if len(rows) < page:
                return
            after = int(rows[-1]["seq"])

    async def transcript_rows(self, session_id: str, after: int, limit: int,
                              page: int = 200) -> AsyncIterator[dict[str, Any]]:
        """`seq`, `kind`, `payload` of at most `limit` events after `after`, in seq order, read `page` rows
        at a time (one short statement each: no connection is held between pages)."""
        left = limit
        while left > 0:
            # Prompts sent through the bridge carry who sent them (chat_commands, docs/commands.md).
            asked = and_(C.upstream == E.upstream, C.session_id == E.session_id, C.admitted_seq == E.seq,
                         C.command == "prompt", E.kind == "prompt:admitted")
            stmt = (
                select(E.seq, E.kind, E.payload, C.subject.label("asked_by"))
                .select_from(chat_session_events.outerjoin(chat_commands, asked))
                .where(E.upstream == self.upstream, E.session_id == session_id, E.seq > after)
                .order_by(E.seq)
                .limit(min(page, left))
            )
            async with self._engine.connect() as conn:
                rows = [_dict(r) for r in await conn.execute(stmt)]
            for r in rows:
                yield r
            if len(rows) < min(page, left):
                return
            left -= len(rows)
            after = int(rows[-1]["seq"])

    async def count_events(self, session_id: str) -> int:
        stmt = text("SELECT count(*) FROM chat_session_events WHERE upstream = :u AND session_id = :s")
        async with self._engine.connect() as conn:
            return int((await conn.execute(stmt, {"u": self.upstream, "s": session_id})).scalar_one())

    async def chain_rows(self, session_id: str) -> list[ChainRow]:
        stmt = text(
            "SELECT seq, event_id, payload::text AS payload_text, chain_hash FROM chat_session_events "
            "WHERE upstream = :u AND session_id = :s ORDER BY seq"
        )
        async with self._engine.connect() as conn:
            rows = await conn.execute(stmt, {"u": self.upstream, "s": session_id})
            return [ChainRow(int(r.seq), str(r.event_id), str(r.payload_text), r.chain_hash) for r in rows]

    async def session_ids(self) -> list[str]:
        stmt = select(S.session_id).where(S.upstream == self.upstream).order_by(S.session_id)
        async with self._engine.connect() as conn:
            return [str(r) for r in (await conn.execute(stmt)).scalars()]

    async def tool_calls(self, f: ToolCallFilter) -> list[dict[str, Any]]:
        conds = ["upstream = :u"]
        params: dict[str, Any] = {"u": self.upstream, "limit": f.limit}
        if f.tool:
            conds.append("tool = :tool")
            params["tool"] = f.tool
        if f.session:
            conds.append("session_id = :session")
            params["session"] = f.session
        if f.since:
            conds.append("called_at >= :since")
            params["since"] = f.since
        if f.until:
            conds.append("called_at < :until")
            params["until"] = f.until
        if f.after:
            conds.append("(session_id, called_seq) > (:after_s, :after_q)")
            params["after_s"], params["after_q"] = f.after
        if f.sessions is not None:
            conds.append("session_id = ANY(:scope)")
            params["scope"] = sorted(f.sessions)
        sql = (
            "SELECT session_id, call_id, tool, input, assistant_message_id, called_seq, called_at, outcome, "
            "output_text, output, structured, error_type, error_message, finished_seq, finished_at, duration_ms, "
            f"{_ASKED_BY} AS asked_by "
            f"FROM audit_tool_calls t WHERE {' AND '.join(conds)} ORDER BY session_id, called_seq LIMIT :limit"
        )
        async with self._engine.connect() as conn:
            return [_dict(r) for r in await conn.execute(text(sql), params)]
