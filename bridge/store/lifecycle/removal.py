"""The deletes that take whole sessions out of the mirror: every table that refers to a session, one
statement each, with the number of rows each session lost (`RowCounts`). Run inside the caller's
transaction (erasure, retention), after `lock_sessions`.

Which tables: `chat_session_events`, `chat_event_rejects`, `chat_session_gaps`, `chat_permission_requests`
(permissions and questions), `chat_session_errors`, `chat_commands` (by `session_id` or `target_session`;
the `erase` commands themselves stay: they are the audit of the erasure) and `chat_sessions` last.
`bridge_incarnations` and `bridge_revoked_tokens` name no session. `tests/integration/test_lifecycle_erase.py`
checks that every table of `bridge.store.schema` with a `session_id` column is in this list.

Locking: the `chat_sessions` rows in `session_id` order (`FOR UPDATE`), the order every multi-row statement
of the store takes them (bridge.store.writes.transaction), so a running group commit finishes first and the
next write of such a session is fenced (its row is gone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BindParameter, Text, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

# table -> the WHERE clause naming its rows of the sessions `:ids` of `:upstream`
SESSION_TABLES: dict[str, str] = {
    "chat_session_events": "session_id = ANY(:ids)",
    "chat_event_rejects": "session_id = ANY(:ids)",
    "chat_session_gaps": "session_id = ANY(:ids)",
    "chat_permission_requests": "session_id = ANY(:ids)",
    "chat_session_errors": "session_id = ANY(:ids)",
    "chat_commands": "(session_id = ANY(:ids) OR target_session = ANY(:ids)) AND command <> 'erase'",
    "chat_sessions": "session_id = ANY(:ids)",
}
# The delete of the events reads only the sessions' partitions: their days, from the rows of chat_sessions
# (deleted last). The WHERE clauses above stay what names a session's rows (the tests count with them).
_PRUNED = {"chat_session_events": " AND session_day = ANY(CAST(:days AS date[]))"}
_DAYS = "SELECT DISTINCT session_day FROM chat_sessions WHERE upstream = :upstream AND session_id = ANY(:ids)"
# the column that names the session in each table's counts
_COUNTED_BY = {"chat_commands": "coalesce(nullif(target_session, ''), session_id)"}

RowCounts = dict[str, dict[str, int]]  # session -> table -> rows deleted


def _ids(ids: Sequence[str]) -> BindParameter[Any]:
    return bindparam("ids", list(ids), type_=ARRAY(Text))


async def lock_sessions(conn: AsyncConnection, upstream: str, ids: Sequence[str]) -> list[str]:
    """Lock the sessions' rows (those that exist) in `session_id` order; returns their ids."""
    stmt = text("SELECT session_id FROM chat_sessions WHERE upstream = :upstream AND session_id = ANY(:ids) "
                "ORDER BY session_id FOR UPDATE").bindparams(_ids(ids), upstream=upstream)
    return [str(r.session_id) for r in await conn.execute(stmt)]


async def remove_sessions(conn: AsyncConnection, upstream: str, ids: Sequence[str],
                          skip: Sequence[str] = ()) -> RowCounts:
    """Delete every row of these sessions; the rows each session lost, by table (tables with none left out).
    `skip`: tables left alone (retention drops a whole day's partition of events instead)."""
    counts: RowCounts = {sid: {} for sid in ids}
    if not ids:
        return counts
    days = [r[0] for r in await conn.execute(text(_DAYS).bindparams(_ids(ids), upstream=upstream))]
    for table, where in SESSION_TABLES.items():
        if table in skip:
            continue
        by = _COUNTED_BY.get(table, "session_id")
        pruned = _PRUNED.get(table)
        stmt = text(f"WITH gone AS (DELETE FROM {table} WHERE upstream = :upstream AND {where}{pruned or ''} "
                    f"RETURNING {by} AS sid) SELECT sid, count(*) AS n FROM gone GROUP BY sid"
                    ).bindparams(_ids(ids), upstream=upstream)
        if pruned:
            stmt = stmt.bindparams(days=days)
        for r in await conn.execute(stmt):
            if r.sid in counts:
                counts[str(r.sid)][table] = int(r.n)
    return counts
