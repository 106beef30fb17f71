"""The one write transaction: the batches of one or many sessions, stored together (docs/mirror.md).

    BEGIN
    lock the sessions' rows in session_id order (FOR UPDATE) ── fence: a write whose lease_epoch is not
        the stored one (or whose lease was released) is refused; the others go on
    the chain anchor of each session; every event's link computed here (bridge.store.jsonb_text)
    fast path (bridge.store.writes.copy_in), a group of COPY_MIN_ROWS rows or more: SAVEPOINT; COPY the rows,
        links included; RELEASE ── PostgreSQL's multi-row insert; then PostgreSQL checks every stored
        link against its own text of the payload (one read, no write)
    otherwise (a smaller group, a payload only PostgreSQL can print, or COPY refused — a clash with a
        stored row or within the group, after ROLLBACK TO SAVEPOINT): INSERT … SELECT FROM unnest(column
        arrays) ON CONFLICT DO NOTHING, links included, PostgreSQL confirming each payload's text
    [rare] fewer rows in than sent: benign or conflicting duplicates (bridge.store.writes.duplicates); a session
        with skipped rows, or a text PostgreSQL prints otherwise, relinked by PostgreSQL
    rejects (conflicts, lossy payloads)
    cursor_seq = greatest(cursor_seq, max seq), NOTIFY ── one statement for every session
    COMMIT

COPY is all or nothing: any refusal (a unique violation, a value PostgreSQL will not take) rolls back to
the savepoint and the same rows take the INSERT path, which sorts duplicates from clashes as before, so the
fast path changes speed, never outcome. A connection lost meanwhile surfaces from the rollback as the usual
`DBAPIError` (invalidated), exactly as from any other statement.

Statements go to asyncpg as prepared SQL text (`exec_driver_sql`: no SQLAlchemy compilation per call) with
one array per column, so their count is fixed whatever the number of sessions and events. They still run
on the SQLAlchemy connection: its transaction, pool and error translation (`DBAPIError`, a killed
connection invalidated) stay what every caller and fault test relies on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

import bridge.store.writes.chain as audit_q
import bridge.store.writes.rejects as q
from bridge import metrics
from bridge.store.db import fetch_rows
from bridge.store.notices import NOTIFY_CHANNEL, notice_payload
from bridge.store.writes.copy_in import chain_links, copy_events
from bridge.store.writes.duplicates import (
    Outcome,
    classify_skipped,
    reject_rows,
)
from bridge.store.writes.rows import COLUMNS, PreparedEvent

# Called inside the transaction after the rows are inserted and before the cursor moves: a seam for fault
# injection in tests (kill the connection there: the cursor must not have moved).
WriteHook = Callable[[AsyncConnection], Awaitable[None]]


@dataclass(frozen=True)
class BatchResult:
    inserted: int  # new rows in chat_session_events
    duplicates: int  # identical rows already stored (same seq, event id and payload): benign
    rejected: int  # conflicting duplicates / unstorable events, kept in chat_event_rejects
    cursor_seq: int  # the stored cursor after the commit


@dataclass(frozen=True)
class SessionWrite:
    """One follower's batch: what `EventSink.write()` hands over, prepared (bridge.store.writes.rows)."""

    session_id: str
    epoch: int
    events: Sequence[PreparedEvent]
    received_at: datetime
    # The cursor the writer believes stored (None: not checked). A stored cursor below it means the
    # database lost commits (failover to a standby that lacked them): the write is refused as `Behind`.
    expected_cursor: int | None = None


@dataclass(frozen=True)
class Behind:
    """The session's stored cursor is below what its writer wrote before: nothing of the write was stored
    (the writer re-reads from `stored`, docs/scaling.md "Failover")."""

    expected: int
    stored: int


@dataclass(frozen=True)
class Fenced:
    """The write presented an epoch that is not the session's: nothing of it was written."""

    presented: int
    held: tuple[int, str | None] | None  # (lease_epoch, lease_owner) stored, None: no such session


WriteResult = BatchResult | Fenced | Behind


# Insert columns after `upstream`, in PreparedEvent.values order; `payload` travels as text, cast once (`doc`).
_SQL_TYPES = {"seq": "bigint", "schema_version": "integer", "event_time": "timestamptz",
              "received_at": "timestamptz", "cost": "double precision", "payload_lossy": "boolean",
              **{c: "bigint" for c in COLUMNS if c.startswith("tokens_")}}
_COLUMNS = (*((c, _SQL_TYPES.get(c, "text")) for c in COLUMNS), ("payload", "text"))
_NAMES = ", ".join(name for name, _ in _COLUMNS)
_ARRAYS = ", ".join(f"${i + 2}::{sql_type}[]" for i, (_, sql_type) in enumerate(_COLUMNS))
_CHAIN_PARAM = f"${len(_COLUMNS) + 2}"

# The chain links come computed (bridge.store.hash_chain.link over PostgreSQL's text of the payload, which the
# payload text already is: bridge.store.jsonb_text); PostgreSQL confirms that text row by row and stores
# no link where it differs (RETURNING says so; that session is then relinked by PostgreSQL itself). The
# rows go in unnest order, so of two rows of one batch that clash, the first is the one inserted.
INSERT_EVENTS = f"""
WITH ins AS (
    INSERT INTO chat_session_events (upstream, {_NAMES}, chain_hash)
    SELECT $1, {", ".join("t." + name for name, _ in _COLUMNS[:-1])}, d.doc,
           CASE WHEN d.doc::text = t.payload THEN t.chain_hash END
    FROM unnest({_ARRAYS}, {_CHAIN_PARAM}::text[]) AS t({_NAMES}, chain_hash),
         LATERAL (SELECT t.payload::jsonb AS doc) d
    ON CONFLICT DO NOTHING
    RETURNING session_id, chain_hash IS NULL AS unlinked
)
SELECT count(*), coalesce(array_agg(DISTINCT session_id) FILTER (WHERE unlinked), '{{}}') FROM ins
"""

# Only when fewer rows went in than were sent (a duplicate): which ones did, i.e. carry this transaction's id.
INSERTED_HERE = """
SELECT e.session_id, e.seq, e.event_id FROM chat_session_events e
WHERE e.upstream = $1 AND (e.session_id, e.seq) IN (SELECT * FROM unnest($2::text[], $3::bigint[]))
  AND e.xmin = pg_current_xact_id()::xid
"""

# COPY pays four extra round trips (savepoint, COPY's own, release, the check) to save about half the
# server CPU per row: clearly worth it for the groups of a busy bridge (thousands of rows, many sessions),
# not measurably for one session's page of 100 to 200 rows or a quiet session's event, which take the INSERT
# path in one round trip (BENCHMARKS.md).
COPY_MIN_ROWS = 500

LOCK_SESSIONS = """
SELECT session_id, lease_epoch, lease_owner, cursor_seq FROM chat_sessions
WHERE upstream = $1 AND session_id = ANY($2::text[])
ORDER BY session_id
FOR UPDATE
"""

# The cursor only moves forward; PostgreSQL delivers the NOTIFYs if and when the transaction commits.
ADVANCE_AND_NOTIFY = """
WITH moved AS (
    UPDATE chat_sessions s
    SET cursor_seq = greatest(s.cursor_seq, v.max_seq),
        first_event_at = coalesce(s.first_event_at, v.first_at),
        last_event_at = greatest(s.last_event_at, v.last_at),
        updated_at = now()
    FROM unnest($2::text[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $6::text[])
         AS v(session_id, max_seq, first_at, last_at, notice)
    WHERE s.upstream = $1 AND s.session_id = v.session_id
    RETURNING s.session_id, s.cursor_seq, v.notice
)
SELECT session_id, cursor_seq, pg_notify($7, notice) FROM moved
"""


async def lock_and_fence(
    conn: AsyncConnection, upstream: str, writes: Sequence[SessionWrite]
) -> tuple[dict[str, int], dict[int, Fenced]]:
    """Lock every session of the group; (stored cursor by session, Fenced by index of a refused write)."""
    sids = sorted({w.session_id for w in writes})
    rows = await fetch_rows(conn, LOCK_SESSIONS, (upstream, sids))
    held = {str(r[0]): (int(r[1]), r[2], int(r[3])) for r in rows}
    fenced: dict[int, Fenced] = {}
    for i, w in enumerate(writes):
        h = held.get(w.session_id)
        if h is None or h[0] != w.epoch or h[1] is None:
            fenced[i] = Fenced(w.epoch, None if h is None else (h[0], h[1]))
    return {sid: h[2] for sid, h in held.items()}, fenced


async def insert_events(conn: AsyncConnection, upstream: str, writes: Sequence[SessionWrite]) -> list[Outcome]:
    """Insert the events of every write, chained; the outcome of each write, in order."""
    tagged = [(w.session_id, p) for w in writes for p in w.events]
    if not tagged:
        return [Outcome() for _ in writes]
    chain = await chain_links(conn, upstream, tagged)
    if not chain.by_pg and len(tagged) >= COPY_MIN_ROWS:
        unconfirmed = await copy_events(conn, upstream, tagged, chain)
        if unconfirmed is not None:
            metrics.GROUP_ROWS.labels(path="copy").inc(len(tagged))
            seqs = _seqs_by_session(writes, [w.events for w in writes])
            for sid in sorted(unconfirmed):
                await audit_q.chain_new_events(conn, upstream, sid, seqs.get(sid, []))
            return [Outcome(inserted=list(w.events)) for w in writes]
    metrics.GROUP_ROWS.labels(path="insert").inc(len(tagged))
    relink = set(chain.by_pg)
    columns: list[Any] = [list(c) for c in zip(*(p.values for _, p in tagged), strict=True)]
    columns.append([p.payload_text for _, p in tagged])
    ((count, unlinked),) = await fetch_rows(conn, INSERT_EVENTS, (upstream, *columns, chain.links))
    relink.update(unlinked)  # left to PostgreSQL, or it prints the payload otherwise than the text hashed
    if count == len(tagged):  # the common case: every row went in, nothing to tell apart
        outcomes = [Outcome(inserted=list(w.events)) for w in writes]
        skipped_by_session: dict[str, list[tuple[Outcome, PreparedEvent]]] = {}
    else:
        outcomes, skipped_by_session = await _tell_apart(conn, upstream, writes, columns)
    for sid, skipped in skipped_by_session.items():
        await classify_skipped(conn, upstream, sid, skipped)
    # The links computed above assumed every row inserted: relink what really was, where that is not so.
    inserted = _seqs_by_session(writes, [o.inserted for o in outcomes])
    for sid in sorted(relink | set(skipped_by_session)):
        await audit_q.chain_new_events(conn, upstream, sid, inserted.get(sid, []))
    return outcomes


def _seqs_by_session(writes: Sequence[SessionWrite], events: Sequence[Sequence[PreparedEvent]]) -> dict[str, list[int]]:
    """The seqs of `events[i]` (the rows of `writes[i]`) by session, in write order: one pass, not one per
    session (a warm-up's group holds thousands of sessions)."""
    out: dict[str, list[int]] = {}
    for w, evs in zip(writes, events, strict=True):
        out.setdefault(w.session_id, []).extend(p.seq for p in evs)
    return out


async def _tell_apart(
    conn: AsyncConnection, upstream: str, writes: Sequence[SessionWrite], columns: list[Any]
) -> tuple[list[Outcome], dict[str, list[tuple[Outcome, PreparedEvent]]]]:
    """Which events went in (of two that clash in one batch, the first), and the skipped ones by session."""
    returned: Counter[tuple[str, int, str]] = Counter(
        (str(sid), int(seq), str(eid))
        for sid, seq, eid in await fetch_rows(conn, INSERTED_HERE, (upstream, columns[0], columns[1])))
    outcomes: list[Outcome] = []
    skipped_by_session: dict[str, list[tuple[Outcome, PreparedEvent]]] = {}
    for w in writes:
        out = Outcome()
        for p in w.events:
            key = (w.session_id, p.seq, p.event_id)
            if returned[key] > 0:
                returned[key] -= 1
                out.inserted.append(p)
            else:
                skipped_by_session.setdefault(w.session_id, []).append((out, p))
        outcomes.append(out)
    return outcomes, skipped_by_session


async def advance_and_notify(conn: AsyncConnection, upstream: str, writes: Sequence[SessionWrite]) -> dict[str, int]:
    """Move every written session's cursor past its batch and queue its commit notice; the new cursors."""
    span: dict[str, tuple[int, datetime, datetime]] = {}
    for w in writes:
        if not w.events:
            continue
        times = [p.event_time or w.received_at for p in w.events]
        top, first, last = max(p.seq for p in w.events), min(times), max(times)
        if w.session_id in span:
            t, f, la = span[w.session_id]
            top, first, last = max(top, t), min(first, f), max(last, la)
        span[w.session_id] = (top, first, last)
    if not span:
        return {}
    sids = sorted(span)
    params = (
        upstream, sids, [span[s][0] for s in sids], [span[s][1] for s in sids], [span[s][2] for s in sids],
        [notice_payload(upstream, s, span[s][0]) for s in sids], NOTIFY_CHANNEL,
    )
    return {str(r[0]): int(r[1]) for r in await fetch_rows(conn, ADVANCE_AND_NOTIFY, params)}


async def commit_writes(
    conn: AsyncConnection,
    upstream: str,
    writes: Sequence[SessionWrite],
    before_cursor_update: WriteHook | None,
    log: structlog.stdlib.BoundLogger,
) -> list[WriteResult]:
    """Everything between BEGIN and COMMIT (the caller owns the transaction): one result per write."""
    cursors, fenced = await lock_and_fence(conn, upstream, writes)
    behind: dict[int, Behind] = {
        i: Behind(w.expected_cursor, cursors[w.session_id]) for i, w in enumerate(writes)
        if i not in fenced and w.expected_cursor is not None and cursors[w.session_id] < w.expected_cursor}
    accepted = [w for i, w in enumerate(writes) if i not in fenced and i not in behind]
    outcomes = iter(await insert_events(conn, upstream, accepted))
    paired = [(w, next(outcomes)) for w in accepted]
    rejects = [row for w, out in paired for row in reject_rows(upstream, w.session_id, w.received_at, out)]
    for w, out in paired:
        for p, clashes in out.conflicts:
            log.error("conflicting_duplicate", session_id=w.session_id, seq=p.seq, event_id=p.event_id,
                      stored=[(s["session_id"], s["seq"], s["event_id"]) for s in clashes])
    if rejects:
        await conn.execute(q.insert_rejects(rejects))
    if before_cursor_update is not None and any(w.events for w in accepted):
        await before_cursor_update(conn)
    cursors.update(await advance_and_notify(conn, upstream, accepted))
    by_write = dict(zip((id(w) for w in accepted), (out for _, out in paired), strict=True))
    results: list[WriteResult] = []
    for i, w in enumerate(writes):
        if i in fenced or i in behind:
            results.append(fenced.get(i) or behind[i])
            continue
        out = by_write[id(w)]
        results.append(BatchResult(len(out.inserted), out.duplicates, len(out.conflicts), cursors[w.session_id]))
    return results
