"""The session tree: a subagent's session names its parent in its seq 0 (`session.created`
`info.parentID`, docs/upstream.md §20). Read from the stored events, so nothing else has to be kept in
step: a session is a child as soon as its seq 0 is stored (docs/mirror.md "Seq 0").

- `ancestors(conn, upstream, sid)`: the parent, its parent, … (bounded depth, cycles impossible to loop on);
- `children(conn, upstream, sid)`: the sessions whose seq 0 names `sid`;
- `widen(claims, …)`: a token limited to sessions also grants their descendants (read, and answering their
  permission requests and questions with the same scope: a subagent's tool call would hang otherwise).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.auth import Claims
from bridge.store.schema import chat_session_events, chat_sessions, session_day_of

MAX_DEPTH = 16  # subagents of subagents …: far more than opencode nests

E = chat_session_events.c
# `payload #>> {data,info,parentID}` of a seq 0 (`session.created`)
PARENT_ID = E.payload[("data", "info", "parentID")].astext


# The parent of a `chat_sessions` row as a column of a select over that table (the WebSocket `sessions`
# answer and `subscribed`, docs/websocket.md): one primary-key lookup of the row's seq 0.
PARENT_COLUMN = (
    select(PARENT_ID)
    .where(E.upstream == chat_sessions.c.upstream, E.session_id == chat_sessions.c.session_id,
           E.session_day == chat_sessions.c.session_day, E.seq == 0,
           E.kind == "session:created")
    .correlate(chat_sessions).scalar_subquery().label("parent_id")
)


def select_parent(upstream: str, session_id: str) -> Select[Any]:
    return select(PARENT_ID.label("parent_id")).where(
        E.upstream == upstream, E.session_id == session_id, E.session_day == session_day_of(upstream, session_id),
        E.seq == 0, E.kind == "session:created")


def select_children(upstream: str, session_id: str) -> Select[Any]:
    return (
        select(E.session_id)
        .where(E.upstream == upstream, E.seq == 0, E.kind == "session:created", session_id == PARENT_ID)
        .order_by(E.session_id)
    )


async def parent_of(conn: AsyncConnection, upstream: str, session_id: str) -> str | None:
    row = (await conn.execute(select_parent(upstream, session_id))).one_or_none()
    return None if row is None or not isinstance(row.parent_id, str) else row.parent_id


async def ancestors(conn: AsyncConnection, upstream: str, session_id: str) -> list[str]:
    out: list[str] = []
    current = session_id
    for _ in range(MAX_DEPTH):
        parent = await parent_of(conn, upstream, current)
        if parent is None or parent in out or parent == session_id:
            break
        out.append(parent)
        current = parent
    return out


async def children(conn: AsyncConnection, upstream: str, session_id: str) -> list[str]:
    return [r.session_id for r in await conn.execute(select_children(upstream, session_id))]


async def widen(claims: Claims, engine: AsyncEngine, upstream: str, session_id: str) -> Claims:
    """`claims`, granting `session_id` too when it descends from a session the token grants."""
    if claims.allows(session_id):
        return claims
    assert claims.sessions is not None
    async with engine.connect() as conn:
        chain = await ancestors(conn, upstream, session_id)
    if any(claims.allows(a) for a in chain):
        return dataclasses.replace(claims, sessions=claims.sessions | {session_id})
    return claims
