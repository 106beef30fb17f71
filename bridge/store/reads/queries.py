"""The read queries of the mirror, together, as named constructs: the session listings (the store's, the
viewer's page), the feed's (events after a seq, a session's head, permission requests) and the audit's
(sessions page, events, transcript pages, tool calls, the hash chain's rows). `EventStore`, `FanoutStore`
and `AuditReader` execute them; their rows become Python through `bridge.store.codecs`. The v2 replay
frames PostgreSQL builds are `bridge.store.reads.replay`.

Views for auditors (`audit_prompts`, `audit_tool_calls`, `audit_texts`, `audit_steps`) cover both runtimes
since migration 0008 (`migrations/versions/0008_views_both_runtimes.py` holds their definition, docs/audit.md;
migration 0004 holds its own first version: migrations import nothing from `bridge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Text, TextClause, and_, cast, func, or_, select, text

from bridge.store.chat_sessions.reader import EVENT_COUNT
from bridge.store.codecs import AUDIT_SESSION_FIELDS
from bridge.store.schema import (
    chat_commands,
    chat_permission_requests,
    chat_session_events,
    chat_sessions,
    session_day_of,
    session_events,
)

S = chat_sessions.c
E = chat_session_events.c
P = chat_permission_requests.c
C = chat_commands.c

# --- a session's events (the legacy mapper's seed) -----------------------------------


def select_seed_rows(upstream: str, session_id: str, kinds: Sequence[str]) -> Select[Any]:
    """The normalized columns of a session's rows of these kinds: what the legacy mapper's turn state is
    rebuilt from when a follower starts (bridge.events.legacy.SEED_KINDS)."""
    return (
        select(E.event_id, E.kind, E.part_id, E.message_id, E.assistant_message_id)
        .where(session_events(upstream, session_id), E.kind.in_(list(kinds)))
        .order_by(E.seq)
    )


# --- the feed (docs/websocket.md) ----------------------------------------------------------------------


def events_page(stmt: Select[Any], upstream: str, session_id: str, after: int, limit: int) -> Select[Any]:
    """`stmt` limited to the session's events with seq > after, in seq order, at most `limit`."""
    return (stmt.where(E.upstream == upstream, E.session_id == session_id,
                       E.session_day == session_day_of(upstream, session_id), E.seq > after)
            .order_by(E.seq).limit(limit))


def select_events_after(upstream: str, session_id: str, after: int, limit: int) -> Select[Any]:
    return events_page(select(E.seq, E.payload, E.kind), upstream, session_id, after, limit)


def select_pending_permissions(upstream: str, session_id: str) -> Select[Any]:
    return (
        select(P.request_id, P.asked)
        .where(P.upstream == upstream, P.session_id == session_id, P.reply.is_(None), P.asked.is_not(None),
               P.kind == "permission")  # questions share the table (bridge.store.commands_pending.pending)
        .order_by(P.asked_at, P.request_id)
    )


def select_session_permissions(upstream: str, session_id: str, runtime: str | None = None) -> Select[Any]:
    stmt = select(P.request_id, P.reply).where(P.upstream == upstream, P.session_id == session_id,
                                               P.kind == "permission")
    return stmt if runtime is None else stmt.where(P.runtime == runtime)


# --- the audit (docs/audit.md) -------------------------------------------------------------------------

AUDIT_SESSION_COLUMNS = (*(S[name] for name in AUDIT_SESSION_FIELDS if name != "event_count"), EVENT_COUNT)
EVENT_FIELDS = (
    E.seq, E.event_id, E.type, E.kind, E.event_time, E.received_at, E.stored_at, E.message_id,
    E.assistant_message_id, E.part_id, E.call_id, E.tool_name, E.error_type, E.error_message, E.finish,
    E.delivery, E.agent, E.model_id, E.provider_id, E.payload, E.payload_lossy, E.chain_hash,
)



def select_event_count(upstream: str, session_id: str) -> Select[Any]:
    return select(func.count()).select_from(chat_session_events).where(
        E.upstream == upstream, E.session_id == session_id, E.session_day == session_day_of(upstream, session_id))


def select_chain_rows(upstream: str, session_id: str) -> Select[Any]:
    """What the verifier relinks: the payload as PostgreSQL prints it (`payload::text`), and the stored link."""
    return (
        select(E.seq, E.event_id, cast(E.payload, Text).label("payload_text"), E.chain_hash)
        .where(session_events(upstream, session_id))
        .order_by(E.seq)
    )

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
    return select(*AUDIT_SESSION_COLUMNS).where(and_(*conds)).order_by(S.session_id).limit(f.limit)


def select_session_ids(upstream: str) -> Select[Any]:
    return select(S.session_id).where(S.upstream == upstream).order_by(S.session_id)


def select_events_page(upstream: str, session_id: str, after: int, limit: int) -> Select[Any]:
    return events_page(select(*EVENT_FIELDS), upstream, session_id, after, limit)


def select_transcript_page(upstream: str, session_id: str, after: int, limit: int) -> Select[Any]:
    """`seq`, `kind`, `payload` and `asked_by`: prompts sent through the bridge carry who sent them
    (chat_commands, docs/commands.md)."""
    # v2: the admission's seq; legacy (no admission event): the user message, whose id the bridge chose
    by_prompt = or_(C.admitted_seq == E.seq, and_(C.runtime == "legacy", C.upstream_id == E.message_id))
    asked = and_(C.upstream == E.upstream, C.session_id == E.session_id, by_prompt,
                 C.command == "prompt", E.kind == "prompt:admitted")
    stmt = select(E.seq, E.kind, E.payload, C.subject.label("asked_by")).select_from(
        chat_session_events.outerjoin(chat_commands, asked))
    return events_page(stmt, upstream, session_id, after, limit)


def select_tool_calls(upstream: str, f: ToolCallFilter) -> tuple[TextClause, dict[str, Any]]:
    """A page of `audit_tool_calls` (the statement and its parameters)."""
    conds = ["upstream = :u"]
    params: dict[str, Any] = {"u": upstream, "limit": f.limit}
    optional = (("tool = :tool", "tool", f.tool), ("session_id = :session", "session", f.session),
                ("called_at >= :since", "since", f.since), ("called_at < :until", "until", f.until))
    for cond, name, value in optional:
        if value:
            conds.append(cond)
            params[name] = value
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
    return text(sql), params
