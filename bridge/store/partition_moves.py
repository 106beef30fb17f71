"""The online part of the migration to partitions (docs/lifecycle.md, "Partitions"; `opencode-bridge
partition-migrate`): the sessions of the legacy partition (every row stored before migration 0018) move
into their day partitions while the bridge keeps ingesting.

One short transaction per page of sessions:

    lock the sessions' chat_sessions rows, session_id order, FOR UPDATE ── the write transaction's fence
        lock, in its order: a batch of one of them in flight finishes first; the next one waits for this
        commit, then reads the new day with the lock and writes there
    INSERT INTO chat_session_events SELECT … their rows with the new day ── into the day partitions
    DELETE their rows from the old day
    UPDATE chat_sessions SET session_day = the new day
    COMMIT

A session's rows are never in two partitions for a reader: the readers take the day and the rows from one
snapshot (docs/lifecycle.md). A session's new day is the UTC day its `chat_sessions` row was created (the
rule of new sessions). When no session is left in the legacy day, its partition is detached and dropped
(`partitions.detach_and_drop`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store import partitions as parts

_EVENT_COLUMNS = (
    "upstream, session_id, seq, event_id, type, kind, schema_version, event_time, received_at, stored_at, "
    "message_id, assistant_message_id, part_id, call_id, tool_name, error_type, error_message, finish, "
    "tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, tokens_cache_write, cost, delivery, "
    "agent, model_id, provider_id, payload, payload_lossy, chain_hash")

# The sessions to move: the legacy day's. (Strays of the default partition stay there, read and removed
# like any row; their day cannot get its partition until they leave: docs/lifecycle.md.)
_TO_MOVE = text("""
SELECT session_id, (created_at AT TIME ZONE 'UTC')::date AS day FROM chat_sessions
WHERE upstream = :u AND session_day = :legacy AND session_id > :after
ORDER BY session_id LIMIT :limit
""")

_LOCK = text("""
SELECT session_id, session_day FROM chat_sessions WHERE upstream = :u AND session_id = ANY(:ids)
ORDER BY session_id FOR UPDATE
""")

_COPY = text(f"""
INSERT INTO chat_session_events ({_EVENT_COLUMNS}, session_day)
SELECT {", ".join("e." + c.strip() for c in _EVENT_COLUMNS.split(","))}, m.day
FROM unnest(CAST(:ids AS text[]), CAST(:olds AS date[]), CAST(:days AS date[])) AS m(session_id, old, day)
JOIN chat_session_events e ON e.upstream = :u AND e.session_id = m.session_id AND e.session_day = m.old
WHERE e.session_day = ANY(CAST(:olds AS date[]))
""")

_DELETE = text("""
DELETE FROM chat_session_events e
USING unnest(CAST(:ids AS text[]), CAST(:olds AS date[])) AS m(session_id, old)
WHERE e.upstream = :u AND e.session_id = m.session_id AND e.session_day = m.old
  AND e.session_day = ANY(CAST(:olds AS date[]))
""")

_SET_DAY = text("""
UPDATE chat_sessions s SET session_day = m.day
FROM unnest(CAST(:ids AS text[]), CAST(:days AS date[])) AS m(session_id, day)
WHERE s.upstream = :u AND s.session_id = m.session_id
""")

_LEFT_IN_LEGACY = text("SELECT count(*) FROM chat_sessions WHERE session_day = :legacy")
_LEGACY_ROWS = text(f"SELECT count(*) FROM {parts.LEGACY}")


@dataclass
class MoveReport:
    sessions: int = 0
    rows: int = 0
    pages: int = 0
    legacy_dropped: bool = False
    slowest_page_s: float = 0.0
    seconds: float = 0.0
    days: set[date] = field(default_factory=set)

    def fields(self) -> dict[str, object]:
        return {"sessions": self.sessions, "rows": self.rows, "pages": self.pages, "days": len(self.days),
                "legacy_dropped": self.legacy_dropped, "slowest_page_s": round(self.slowest_page_s, 3),
                "seconds": round(self.seconds, 1)}


async def move_page(engine: AsyncEngine, upstream: str, wanted: dict[str, date], report: MoveReport) -> None:
    """Move these sessions (id -> new day) in one transaction; a session whose day changed meanwhile, or
    that left, is skipped (the next round sees it again if it still needs to move)."""
    for day in sorted(set(wanted.values())):
        async with engine.begin() as conn:
            await conn.execute(text(f"SET LOCAL lock_timeout = '{parts.LOCK_TIMEOUT}'"))
            await parts.create_day(conn, day)
    started = time.monotonic()
    async with engine.begin() as conn:
        held = {str(r[0]): r[1] for r in await conn.execute(_LOCK, {"u": upstream, "ids": sorted(wanted)})}
        ids = sorted(held)
        params = {"u": upstream, "ids": ids, "olds": [held[s] for s in ids], "days": [wanted[s] for s in ids]}
        moved = (await conn.execute(_COPY, params)).rowcount
        deleted = (await conn.execute(_DELETE, {k: v for k, v in params.items() if k != "days"})).rowcount
        if moved != deleted:  # cannot be under the locks; said rather than committed
            raise RuntimeError(f"partition move: {moved} rows copied, {deleted} deleted")
        await conn.execute(_SET_DAY, {"u": upstream, "ids": ids, "days": params["days"]})
    report.slowest_page_s = max(report.slowest_page_s, time.monotonic() - started)
    report.sessions += len(ids)
    report.rows += moved
    report.pages += 1
    report.days.update(wanted[s] for s in ids)


async def migrate_to_partitions(engine: AsyncEngine, upstream: str, page: int = 50) -> MoveReport:
    """Move every session of `upstream` that needs it; then drop the legacy partition if nothing is left
    in it (of any upstream)."""
    report, after, started = MoveReport(), "", time.monotonic()
    while True:
        async with engine.connect() as conn:
            rows = (await conn.execute(_TO_MOVE, {"u": upstream, "legacy": parts.LEGACY_DAY, "after": after,
                                                  "limit": page})).all()
        if not rows:
            break
        after = str(rows[-1][0])
        await move_page(engine, upstream, {str(r[0]): r[1] for r in rows}, report)
    report.legacy_dropped = await drop_legacy_if_empty(engine)
    report.seconds = time.monotonic() - started
    return report


async def drop_legacy_if_empty(engine: AsyncEngine) -> bool:
    """DETACH … CONCURRENTLY (not in a transaction block: AUTOCOMMIT) and DROP the legacy partition when
    no session is of its day and it holds no row."""
    async with engine.connect() as conn:
        if (await conn.execute(text("SELECT to_regclass(:n)"), {"n": parts.LEGACY})).scalar() is None:
            return False
        left = int((await conn.execute(_LEFT_IN_LEGACY, {"legacy": parts.LEGACY_DAY})).scalar_one())
        rows = int((await conn.execute(_LEGACY_ROWS)).scalar_one())
    if left or rows:
        return False
    await parts.detach_and_drop(engine, parts.LEGACY)
    return True
