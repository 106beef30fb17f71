"""The one reader of a `chat_sessions` row: `read_session` selects every column (and, for the audit API,
the count of stored events) and maps it with `bridge.store.codecs.session_row`. Every caller that asks
"what does the mirror know of this session" goes through it: the store's `get_session`, the feed's
`head`, the command door's `session`, the audit's `session`. The listings of sessions are here too."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

import bridge.store.chat_sessions.tree as tree
from bridge.store.codecs import SessionRow, session_row
from bridge.store.schema import chat_session_events, chat_sessions, session_key

S = chat_sessions.c
E = chat_session_events.c

# Every column of the row but the upstream (the reader's own): what `SessionRow` holds.
ROW_COLUMNS = tuple(c for c in chat_sessions.c if c.name != "upstream")

# Events stored of the session (the audit API's session object): a count over the primary-key index.
EVENT_COUNT = (
    select(func.count()).select_from(chat_session_events)
    .where(E.upstream == S.upstream, E.session_id == S.session_id)
    .correlate(chat_sessions).scalar_subquery().label("event_count")
)

# The store's own listing (doctor, tests): the columns of the lease and the history.
LIST_COLUMNS = (
    S.session_id, S.directory, S.cursor_seq, S.status, S.deleted, S.lease_owner, S.lease_epoch, S.status_reason,
    S.first_event_at, S.last_event_at, S.deleted_at, S.incomplete,
)


def select_session(upstream: str, session_id: str, *, event_count: bool = False) -> Select[Any]:
    columns = (*ROW_COLUMNS, EVENT_COUNT) if event_count else ROW_COLUMNS
    return select(*columns).where(session_key(upstream, session_id))


async def read_session(conn: AsyncConnection, upstream: str, session_id: str, *,
                       event_count: bool = False) -> SessionRow | None:
    """The session's row (None: not stored); `event_count`: with the number of its stored events."""
    row = (await conn.execute(select_session(upstream, session_id, event_count=event_count))).one_or_none()
    return None if row is None else session_row(row)


def select_sessions(upstream: str, include_deleted: bool) -> Select[Any]:
    stmt = select(*LIST_COLUMNS).where(S.upstream == upstream).order_by(S.session_id)
    if not include_deleted:
        stmt = stmt.where(S.deleted == false())
    return stmt


def select_session_list(upstream: str, limit: int, after: tuple[datetime | None, str] | None = None,
                        scope: frozenset[str] | None = None) -> Select[Any]:
    """The viewer's page, most recently active first (never-active last), keyset `after` = the last row's
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
        select(S.session_id, S.cursor_seq, S.status, S.last_event_at, S.title, tree.PARENT_COLUMN)
        .where(*conds)
        .order_by(S.last_event_at.desc().nulls_last(), S.session_id)
        .limit(limit)
    )
