"""Statuses and titles of many sessions in one transaction (docs/lifecycle.md "Writes in batches").

The activity tracker (bridge.sessions.activity) writes what its status machines and titles decided in the
order it happened; after a warm-up or an `/api/session/active` sweep that is hundreds of sessions at once,
and one transaction per session was the largest cost of an idle daemon (BENCHMARKS.md). Here a batch is:

- statuses: one `UPDATE … FROM unnest(…)` with `set_status_if_owner`'s conditions (the lease holder only,
  never a deleted session), then one `pg_notify` per row written, in the same transaction (delivered only
  if it commits, as bridge.store.notices' `notify_status`); each session at most once per statement;
- titles: one `UPDATE … FROM unnest(…)`, only a change writes (as `set_title`).

First of all the transaction locks every row it will write **in `session_id` order** (`lock_sessions`), the
order the group commit and the lease renewal lock in: an `UPDATE … FROM unnest` locks rows in whatever
order its join meets them, and two transactions locking many rows in different orders can deadlock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge.store.notices import STATUS_CHANNEL, status_payload
from bridge.store.ports.status import StatusWrite as StatusWrite  # re-exported: the port's

SET_STATUSES_IF_OWNER = text(
    "UPDATE chat_sessions AS s SET status = v.status, status_reason = v.reason,"
    " status_version = s.status_version + 1, updated_at = now()"
    " FROM unnest(CAST(:sids AS text[]), CAST(:statuses AS text[]), CAST(:reasons AS text[]))"
    " AS v(session_id, status, reason)"
    " WHERE s.upstream = :u AND s.session_id = v.session_id AND s.lease_owner = :owner AND NOT s.deleted"
    " RETURNING s.session_id, s.status_version"
).bindparams(bindparam("u"), bindparam("owner"), bindparam("sids"), bindparam("statuses"), bindparam("reasons"))

NOTIFY_MANY = text(
    "SELECT count(pg_notify(:channel, p)) FROM unnest(CAST(:payloads AS text[])) AS p"
).bindparams(bindparam("channel"), bindparam("payloads"))

SET_TITLES = text(
    "UPDATE chat_sessions AS s SET title = v.title, updated_at = now()"
    " FROM unnest(CAST(:sids AS text[]), CAST(:titles AS text[])) AS v(session_id, title)"
    " WHERE s.upstream = :u AND s.session_id = v.session_id AND s.title IS DISTINCT FROM v.title"
).bindparams(bindparam("u"), bindparam("sids"), bindparam("titles"))

LOCK_IN_ORDER = text(
    "SELECT session_id FROM chat_sessions WHERE upstream = :u AND session_id = ANY(CAST(:sids AS text[]))"
    " ORDER BY session_id FOR UPDATE"
).bindparams(bindparam("u"), bindparam("sids"))



async def lock_sessions(conn: AsyncConnection, upstream: str, session_ids: Iterable[str]) -> None:
    """Lock the rows of these sessions in `session_id` order (before writing many of them)."""
    sids = sorted(set(session_ids))
    if sids:
        await conn.execute(LOCK_IN_ORDER, {"u": upstream, "sids": sids})


async def set_statuses_if_owner(conn: AsyncConnection, upstream: str, owner: str,
                                writes: Sequence[StatusWrite]) -> set[str]:
    """Write each session's status where `owner` holds its lease (one entry per session); the sessions
    written, each with its NOTIFY queued in this transaction."""
    if not writes:
        return set()
    sids = [w[0] for w in writes]
    if len(set(sids)) != len(sids):
        raise ValueError("a session's statuses go into successive statements, in their order")
    rows = (await conn.execute(SET_STATUSES_IF_OWNER, {
        "u": upstream, "owner": owner, "sids": sids, "statuses": [w[1] for w in writes],
        "reasons": [w[2] for w in writes]})).all()
    versions = {str(r[0]): int(r[1]) for r in rows}
    payloads = [status_payload(upstream, sid, status, reason, versions[sid])
                for sid, status, reason in writes if sid in versions]
    if payloads:
        await conn.execute(NOTIFY_MANY, {"channel": STATUS_CHANNEL, "payloads": payloads})
    return set(versions)


async def set_titles(conn: AsyncConnection, upstream: str, titles: Sequence[tuple[str, str]]) -> None:
    """Each session's title (one entry per session); only a change writes."""
    if titles:
        await conn.execute(SET_TITLES, {"u": upstream, "sids": [t[0] for t in titles],
                                        "titles": [t[1] for t in titles]})
