"""Erasure on request (docs/lifecycle.md, "Erasure"): a session and its subagents' sessions leave the mirror
in one transaction, each leaves a tombstone, and every process's subscribers get the final `erased` status.

    BEGIN
    the tree: the session and every session whose stored seq 0 names it (or one of them) as its parent
    pg_advisory_xact_lock of each (the insert trigger of migration 0017 waits on it, shared)
    lock the chat_sessions rows (bridge.store.lifecycle.removal.lock_sessions)
    delete every row of every table (removal.remove_sessions), count them
    a tombstone per session (the first erasure's row stays; a second one finds nothing left to count)
    NOTIFY bridge_status {status: "erased"} per session
    COMMIT

After the commit nothing of it is written again: a claim of a tombstoned session is refused as deleted
(bridge.store.chat_sessions.claims), the trigger skips every other insert (a live permission, an error, a
reject, a gap, a new `chat_sessions` row from any replica), and a write of a follower that was running is
fenced (its `chat_sessions` row is gone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import Text, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.store.lifecycle.removal import RowCounts, lock_sessions, remove_sessions
from bridge.store.notices import notify_status
from bridge.store.schema import chat_session_tombstones

T = chat_session_tombstones.c
ERASED = "erased"  # the status notice every process turns into the final frame (docs/websocket.md)
MAX_DEPTH = 16  # as bridge.store.chat_sessions.tree

# The session and its descendants by the stored seq 0 (`session.created` `info.parentID`), bounded depth.
_TREE = text("""
WITH RECURSIVE tree(session_id, depth) AS (
    SELECT CAST(:root AS text), 0
    UNION
    SELECT e.session_id, tree.depth + 1
    FROM chat_session_events e JOIN tree ON e.payload #>> '{data,info,parentID}' = tree.session_id
    WHERE e.upstream = :upstream AND e.seq = 0 AND e.kind = 'session:created' AND tree.depth < :max_depth
)
SELECT DISTINCT session_id FROM tree ORDER BY session_id
""")


@dataclass(frozen=True)
class Erasure:
    root: str
    sessions: tuple[str, ...]  # the root and its subagents' sessions, in session_id order
    rows: RowCounts  # per session, per table: rows deleted by this erasure
    already: bool  # the root was tombstoned before (a repeated erasure: the first tombstone stays)

    @property
    def total(self) -> int:
        return sum(n for tables in self.rows.values() for n in tables.values())

    def summary(self) -> dict[str, object]:
        return {"session_id": self.root, "sessions": list(self.sessions), "rows": self.total,
                "already_erased": self.already}


async def session_tree(conn: AsyncConnection, upstream: str, root: str) -> list[str]:
    rows = await conn.execute(_TREE.bindparams(root=root, upstream=upstream, max_depth=MAX_DEPTH))
    return [str(r.session_id) for r in rows]


async def _lock_ids(conn: AsyncConnection, upstream: str, ids: list[str]) -> None:
    """Exclusive advisory locks, in order: a trigger's insert of one of these sessions waits for the commit."""
    await conn.execute(text(
        "SELECT pg_advisory_xact_lock(hashtextextended(:upstream || '|' || sid, 0)) "
        "FROM unnest(CAST(:ids AS text[])) AS sid ORDER BY sid"
    ).bindparams(bindparam("ids", ids, type_=ARRAY(Text)), upstream=upstream))


async def is_tombstoned(conn: AsyncConnection, upstream: str, session_id: str) -> bool:
    q = select(T.session_id).where(T.upstream == upstream, T.session_id == session_id)
    return (await conn.execute(q)).first() is not None


async def tombstoned_among(conn: AsyncConnection, upstream: str, ids: list[str]) -> set[str]:
    q = select(T.session_id).where(T.upstream == upstream, T.session_id.in_(ids))
    return {str(r.session_id) for r in await conn.execute(q)}


async def erase_session(engine: AsyncEngine, upstream: str, root: str, *, erased_by: str, reason: str,
                        command_id: str | None = None) -> Erasure:
    """Erase `root` and its subagents' sessions (the module docstring); idempotent."""
    async with engine.begin() as conn:
        ids = await session_tree(conn, upstream, root)
        await _lock_ids(conn, upstream, ids)
        await lock_sessions(conn, upstream, ids)
        already = await is_tombstoned(conn, upstream, root)
        counts = await remove_sessions(conn, upstream, ids)
        for sid in ids:
            stmt = pg_insert(chat_session_tombstones).values(
                upstream=upstream, session_id=sid, root_session_id=root, erased_by=erased_by, reason=reason,
                rows=bindparam(f"rows_{sid}", json.loads(json.dumps(counts[sid])), type_=JSONB),
                command_id=command_id).on_conflict_do_nothing()
            await conn.execute(stmt)
            await conn.execute(notify_status(upstream, sid, ERASED, None, 0))
    return Erasure(root, tuple(ids), counts, already)
