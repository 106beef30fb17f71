"""The live feed's read of many sessions at once (bridge.fanout.feed): the committed events after each
session's last published seq, framed by PostgreSQL as for a replay (bridge.store.replay), in one
statement for a whole batch of woken sessions instead of one per session.

When a commit touches a thousand sessions with subscribers (a burst across sessions), one read per session
is a thousand round trips through the read pool before the last subscriber hears of its event; here it is
a few. Each session still gets at most `limit` rows (a session with more stays woken and is read again).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.replay import _KINDS, FRAMES_AFTER, StoredFrame

_PER_SESSION = "WHERE e.upstream = :u AND e.session_id = :s AND e.seq > :after"
assert _PER_SESSION in FRAMES_AFTER.text

FRAMES_AFTER_MANY = text(
    "SELECT w.sid, f.* FROM unnest(CAST(:sids AS text[]), CAST(:afters AS bigint[])) AS w(sid, after)\n"
    "CROSS JOIN LATERAL (" + FRAMES_AFTER.text.replace(
        _PER_SESSION, "WHERE e.upstream = :u AND e.session_id = w.sid AND e.seq > w.after") + ") f"
).bindparams(bindparam("u"), bindparam("sids"), bindparam("afters"), bindparam("limit"), bindparam("kinds"))


async def frames_after_many(engine: AsyncEngine, upstream: str, wanted: Sequence[tuple[str, int]],
                            limit: int) -> dict[str, list[StoredFrame]]:
    """Per session of `wanted` (session id, after): its stored events with seq > after, in seq order, at
    most `limit`, as `StoredFrame`s; a session with none is absent."""
    out: dict[str, list[StoredFrame]] = {}
    if not wanted:
        return out
    params = {"u": upstream, "sids": [s for s, _ in wanted], "afters": [a for _, a in wanted], "limit": limit,
              "kinds": _KINDS}
    async with engine.connect() as conn:
        for r in await conn.execute(FRAMES_AFTER_MANY, params):
            out.setdefault(str(r[0]), []).append((int(r[1]), r[2], r[3], r[4]))
    for rows in out.values():
        rows.sort(key=lambda row: row[0])  # each session's rows in seq order, whatever the join's order
    return out
