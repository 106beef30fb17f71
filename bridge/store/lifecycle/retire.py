"""Retention's choice (docs/lifecycle.md, "Retention"): the sessions whose last stored event (or, without one,
whose row's creation) is older than the cutoff, and that are not in use:

- not warm: no lease held (`lease_owner` NULL, or a lease nobody renewed since `lease_expires_at`); a
  session with a WebSocket subscriber is warm in the process that serves the subscriber (docs/lifecycle.md,
  "Subscribers keep a session warm"), so this covers subscribed sessions too;
- no pending request (a permission or question with no reply);
- no command still in flight (`pending`, `queued`, `sending`).

`retire_candidates` lists them (keyset pages by `session_id`); `lock_retirable` re-checks the same rule
inside the deleting transaction, row-locked with `SKIP LOCKED`, and also that the cursor has not moved since
the candidate was read (an archive written from it is still the whole session).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import Text, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

_RULE = """
    s.upstream = :upstream
    AND coalesce(s.last_event_at, s.created_at) < :cutoff
    AND (s.lease_owner IS NULL OR s.lease_expires_at IS NULL OR s.lease_expires_at <= now())
    AND NOT EXISTS (SELECT 1 FROM chat_permission_requests p
                    WHERE p.upstream = s.upstream AND p.session_id = s.session_id AND p.reply IS NULL)
    AND NOT EXISTS (SELECT 1 FROM chat_commands c
                    WHERE c.upstream = s.upstream AND c.session_id = s.session_id
                      AND c.state IN ('pending', 'queued', 'sending'))
"""

_CANDIDATES = text(f"""
SELECT s.session_id, s.cursor_seq, coalesce(s.last_event_at, s.created_at) AS last_at
FROM chat_sessions s
WHERE {_RULE} AND s.session_id > :after
ORDER BY s.session_id
LIMIT :limit
""")

_LOCK = text(f"""
SELECT s.session_id, s.cursor_seq
FROM chat_sessions s
WHERE {_RULE} AND s.session_id = ANY(:ids)
ORDER BY s.session_id
FOR UPDATE SKIP LOCKED
""")

# A whole day (docs/lifecycle.md, "Retention by partition"): every session of the day, of any upstream,
# locked (SKIP LOCKED: a busy one is not waited for) with whether the rule lets it go.
_LOCK_DAY = text(f"""
SELECT s.session_id, ({_RULE}) AS ok
FROM chat_sessions s
WHERE s.session_day = :day
ORDER BY s.upstream, s.session_id
FOR UPDATE OF s SKIP LOCKED
""")
_DAY_SESSIONS = text("SELECT count(*) FROM chat_sessions WHERE session_day = :day")

_IDS = ARRAY(Text)


@dataclass(frozen=True)
class RetireCandidate:
    session_id: str
    cursor_seq: int
    last_at: datetime


async def retire_candidates(conn: AsyncConnection, upstream: str, cutoff: datetime, *, after: str = "",
                            limit: int = 200) -> list[RetireCandidate]:
    rows = await conn.execute(_CANDIDATES.bindparams(upstream=upstream, cutoff=cutoff, after=after, limit=limit))
    return [RetireCandidate(str(r.session_id), int(r.cursor_seq), r.last_at) for r in rows]


async def lock_retirable(conn: AsyncConnection, upstream: str, cutoff: datetime,
                         candidates: Sequence[RetireCandidate]) -> list[str]:
    """The candidates that may still leave, their rows locked: the rule holds, nobody holds the row, and the
    cursor is the one read with the candidate (nothing was stored since)."""
    if not candidates:
        return []
    read = {c.session_id: c.cursor_seq for c in candidates}
    rows = await conn.execute(_LOCK.bindparams(bindparam("ids", list(read), type_=_IDS), upstream=upstream,
                                               cutoff=cutoff))
    return [str(r.session_id) for r in rows if read.get(str(r.session_id)) == int(r.cursor_seq)]


async def lock_day(conn: AsyncConnection, upstream: str, cutoff: datetime, day: date) -> list[str] | None:
    """Every session of `day` locked, if each is of `upstream` and may leave (the rule above): their ids;
    None if one may not, is another upstream's or is busy (its row locked) — the day then stays."""
    rows = (await conn.execute(_LOCK_DAY.bindparams(upstream=upstream, cutoff=cutoff, day=day))).all()
    total = int((await conn.execute(_DAY_SESSIONS.bindparams(day=day))).scalar_one())
    if len(rows) != total or not all(r.ok for r in rows):
        return None
    return [str(r.session_id) for r in rows]
