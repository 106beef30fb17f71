"""The write transaction's fast path (bridge.store.writes.transaction, docs/mirror.md "Writing exactly once").

- `chain_links`: every event's link of the hash chain (bridge.store.hash_chain), computed before the insert from
  its session's anchor — the stored row just below the batch — over the payload's PostgreSQL text form
  (bridge.store.jsonb_text); a session with a payload Python cannot print is left to PostgreSQL.
- `copy_events`: the rows, links included, by COPY inside a savepoint; then PostgreSQL recomputes every
  copied link from its own `payload::text` (one read), and the sessions where one differs are named for a
  relink. COPY is all or nothing: anything it refuses rolls back to the savepoint and the caller takes the
  INSERT path with the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge import metrics
from bridge.store.db import fetch_rows
from bridge.store.hash_chain import GENESIS, link
from bridge.store.writes.rows import COLUMNS, PreparedEvent

# The link each session's batch is chained to: the stored row just before the batch (NULL: genesis).
CHAIN_ANCHORS = """
SELECT g.session_id, (
    SELECT e.chain_hash FROM chat_session_events e
    WHERE e.upstream = $1 AND e.session_id = g.session_id AND e.session_day = g.day AND e.seq < g.min_seq
    ORDER BY e.seq DESC LIMIT 1)
FROM unnest($2::text[], $3::bigint[], $4::date[]) AS g(session_id, min_seq, day)
"""


@dataclass(frozen=True)
class Chain:
    links: list[str | None]  # the link of every event, in the order given (None: left to PostgreSQL)
    by_pg: set[str]  # sessions with a payload whose jsonb text Python cannot produce: relinked after the insert
    spans: dict[str, tuple[int, int, str]]  # linked here: session → (lowest seq, highest seq, anchor link)


async def chain_links(
    conn: AsyncConnection, upstream: str, events: Sequence[tuple[str, PreparedEvent]], days: dict[str, date]
) -> Chain:
    """The chain link of every event, computed here from each session's anchor (its stored row just below)."""
    by_session: dict[str, list[PreparedEvent]] = {}
    for sid, p in events:
        by_session.setdefault(sid, []).append(p)
    by_pg = {sid for sid, ps in by_session.items() if not all(p.canonical for p in ps)}
    sids = sorted(set(by_session) - by_pg)
    links: dict[int, str] = {}
    spans: dict[str, tuple[int, int, str]] = {}
    if sids:
        lows = [min(p.seq for p in by_session[s]) for s in sids]
        rows = await fetch_rows(conn, CHAIN_ANCHORS, (upstream, sids, lows, [days[s] for s in sids]))
        for sid, anchor in rows:
            prev = anchor or GENESIS
            ordered = sorted(by_session[sid], key=lambda p: p.seq)
            spans[sid] = (ordered[0].seq, ordered[-1].seq, prev)
            for p in ordered:
                prev = link(prev, p.seq, p.event_id, p.payload_text)
                links[id(p)] = prev
    return Chain([links.get(id(p)) for _, p in events], by_pg, spans)


COPY_COLUMNS = ("upstream", *COLUMNS, "payload", "chain_hash", "session_day")
_log = structlog.get_logger("bridge.store")

# After a COPY: every stored link of the copied spans checked against PostgreSQL's own text of the payload
# and the link stored before it (the first row of a span against the anchor the links were computed from).
# One read; the sessions where anything differs are relinked by PostgreSQL.
CHECK_LINKS = """
SELECT DISTINCT x.session_id FROM (
    SELECT e.session_id, e.seq, e.event_id, e.payload, e.chain_hash,
           coalesce(lag(e.chain_hash) OVER (PARTITION BY e.session_id ORDER BY e.seq), g.anchor) AS prev
    FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::date[]) AS g(session_id, lo, hi, anchor, day)
    JOIN chat_session_events e ON e.upstream = $1 AND e.session_id = g.session_id AND e.session_day = g.day
        AND e.seq BETWEEN g.lo AND g.hi AND e.session_day = ANY($6::date[])
) x
WHERE x.chain_hash IS DISTINCT FROM encode(sha256(convert_to(
    x.prev || E'\\n' || x.seq || E'\\n' || x.event_id || E'\\n' || x.payload::text, 'UTF8')), 'hex')
"""


async def copy_events(
    conn: AsyncConnection, upstream: str, events: Sequence[tuple[str, PreparedEvent]], chain: Chain,
    days: dict[str, date],
) -> set[str] | None:
    """COPY every event with its link; the sessions whose stored links PostgreSQL does not confirm, or None
    if COPY was refused (nothing of it stored: the savepoint is rolled back)."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    records = [(upstream, *p.values, p.payload_text, h, days[sid])
               for (sid, p), h in zip(events, chain.links, strict=True)]
    # The savepoint statements go through SQLAlchemy (its error translation: a lost connection is an
    # invalidated DBAPIError, here as everywhere). Rolled back *and released*: the INSERT path that follows
    # runs in the transaction itself (it tells its own rows by the transaction id).
    await conn.exec_driver_sql("SAVEPOINT bridge_copy")
    try:
        await driver.copy_records_to_table("chat_session_events", records=records, columns=COPY_COLUMNS)
    except Exception as e:
        await conn.exec_driver_sql("ROLLBACK TO SAVEPOINT bridge_copy")
        await conn.exec_driver_sql("RELEASE SAVEPOINT bridge_copy")
        # A clash (a replayed event) is expected now and then; anything else refused every time would make
        # every large group pay for a COPY in vain: counted by kind, and said.
        reason = type(e).__name__
        metrics.COPY_REFUSED.labels(reason=reason).inc()
        if reason != "UniqueViolationError":
            _log.warning("copy_refused", reason=reason, error=str(e)[:300], rows=len(records))
        return None
    await conn.exec_driver_sql("RELEASE SAVEPOINT bridge_copy")
    sids = sorted(chain.spans)
    spans = [chain.spans[s] for s in sids]
    params = (upstream, sids, [s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans],
              [days[s] for s in sids])
    return {str(r[0]) for r in await fetch_rows(conn, CHECK_LINKS, params)}
