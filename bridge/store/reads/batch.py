"""Reads of many sessions in one statement, for the fan-out: the live feed's new events of every woken
session (bridge.fanout.feed) and the catch-up reads of a subscribe storm (bridge.fanout.shared_reads): the
heads of many sessions, their pending requests, and pages of stored events after many (session, after)
pairs, framed by PostgreSQL as for a replay (bridge.store.reads.replay).

When a thousand sessions have something to read at once (a burst across sessions, a reconnect storm), one
read per session is a thousand round trips through the small read pool; here it is a few. Each (session,
after) still gets at most `limit` rows (one with more is read again from its last row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.chat_sessions import tree
from bridge.store.codecs import SessionRow, session_row
from bridge.store.commands_pending.pending import _COLUMNS, MAX_LIST, StoredRequest, _row
from bridge.store.reads.replay import _KINDS, _PYTHON_KINDS, FRAMES_AFTER, GENERIC_PLAN, StoredFrame
from bridge.store.schema import chat_permission_requests, chat_sessions

S = chat_sessions.c
P = chat_permission_requests.c
_PER_SESSION = "WHERE e.upstream = :u AND e.session_id = :s AND e.seq > :after"
assert _PER_SESSION in FRAMES_AFTER.text

FRAMES_AFTER_MANY = text(
    "SELECT w.i, f.* FROM unnest(CAST(:sids AS text[]), CAST(:afters AS bigint[]))"
    " WITH ORDINALITY AS w(sid, after, i)\n"
    "CROSS JOIN LATERAL (" + FRAMES_AFTER.text.replace(
        _PER_SESSION, "WHERE e.upstream = :u AND e.session_id = w.sid AND e.seq > w.after") + ") f"
).bindparams(bindparam("u"), bindparam("sids"), bindparam("afters"), bindparam("limit"), bindparam("kinds"),
            bindparam("python_kinds"))


async def frames_after_many(engine: AsyncEngine, upstream: str, wanted: Sequence[tuple[str, int]],
                            limit: int) -> list[list[StoredFrame]]:
    """Per (session id, after) of `wanted`, in the same order: its stored events with seq > after, in seq
    order, at most `limit`, as `StoredFrame`s."""
    out: list[list[StoredFrame]] = [[] for _ in wanted]
    if not wanted:
        return out
    params = {"u": upstream, "sids": [s for s, _ in wanted], "afters": [a for _, a in wanted], "limit": limit,
              "kinds": _KINDS, "python_kinds": _PYTHON_KINDS}
    async with engine.connect() as conn:
        await conn.execute(GENERIC_PLAN)
        for r in await conn.execute(FRAMES_AFTER_MANY, params):
            out[int(r[0]) - 1].append((int(r[1]), r[2], r[3], r[4]))
    for rows in out:
        rows.sort(key=lambda row: row[0])  # each one's rows in seq order, whatever the join's order
    return out


async def heads(engine: AsyncEngine, upstream: str, session_ids: Sequence[str]) -> dict[str, SessionRow]:
    """`FanoutStore.head` of many sessions; a session not stored is absent."""
    if not session_ids:
        return {}
    stmt = (select(S.session_id, S.cursor_seq, S.status, S.status_reason, S.status_version, S.incomplete,
                   S.deleted, S.title, tree.PARENT_COLUMN)
            .where(S.upstream == upstream, S.session_id.in_(sorted(set(session_ids)))))
    async with engine.connect() as conn:
        rows = [session_row(r) for r in await conn.execute(stmt)]
    return {r.session_id: r for r in rows}


def _nulls_first(r: StoredRequest) -> tuple[bool, Any, str]:
    return (r.asked_at is not None, r.asked_at or 0, r.request_id)


def _nulls_last(r: StoredRequest) -> tuple[bool, Any, str]:
    return (r.asked_at is None, r.asked_at or 0, r.request_id)


async def requests(engine: AsyncEngine, upstream: str, session_ids: Sequence[str]
                   ) -> dict[str, tuple[list[dict[str, Any]], list[StoredRequest]]]:
    """Per session: `FanoutStore.pending_permissions` (the pending permissions' asked envelopes, oldest
    first) and `PendingStore.questions` (every question, oldest first, at most MAX_LIST), in one statement."""
    out: dict[str, tuple[list[dict[str, Any]], list[StoredRequest]]] = {s: ([], []) for s in session_ids}
    if not session_ids:
        return out
    stmt = select(*_COLUMNS).where(
        P.upstream == upstream, P.session_id.in_(sorted(set(session_ids))),
        or_(P.kind == "question", and_(P.kind == "permission", P.reply.is_(None), P.asked.is_not(None))))
    async with engine.connect() as conn:
        rows = [_row(r) for r in await conn.execute(stmt)]
    permissions: dict[str, list[StoredRequest]] = {}
    questions: dict[str, list[StoredRequest]] = {}
    for r in rows:
        (permissions if r.kind == "permission" else questions).setdefault(r.session_id, []).append(r)
    for sid, (asked, listed) in out.items():
        asked.extend(r.asked for r in sorted(permissions.get(sid, []), key=_nulls_last) if r.asked is not None)
        listed.extend(sorted(questions.get(sid, []), key=_nulls_first)[:MAX_LIST])
    return out
