"""SQL of a session's status on `chat_sessions` (docs/lifecycle.md): status writes by the lease holder,
parking, the deletion tombstone, the title, and the seq gaps that make a session incomplete.
Statements are named constructs; `bridge.store.chat_sessions.leases.LeaseStore` and `EventStore` execute them, each
status write with its `notify_status` in the same transaction (bridge.store.notices)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Insert, Select, Update, false, func, or_, select, true
from sqlalchemy.dialects.postgresql import insert as pg_insert

from bridge.store.schema import chat_session_events, chat_session_gaps, chat_sessions, session_events, session_key

S = chat_sessions.c
E = chat_session_events.c
G = chat_session_gaps.c


def set_status_if_owner(upstream: str, session_id: str, owner: str, status: str, reason: str | None) -> Update:
    """Only the lease holder speaks for a session's status (a fenced follower must not overwrite it);
    `deleted` is terminal."""
    return (
        chat_sessions.update()
        .where(session_key(upstream, session_id), S.lease_owner == owner, S.deleted == false())
        .values(status=status, status_reason=reason, status_version=S.status_version + 1, updated_at=func.now())
        .returning(S.status_version)
    )


def park_if_free_or_ours(upstream: str, session_id: str, owner: str, reason: str) -> Update:
    """Status `parked` (bridge.sessions.parking), unless a peer holds the session (it speaks for it) or it
    is deleted; a lease we still hold is given back in the same statement."""
    return (
        chat_sessions.update()
        .where(session_key(upstream, session_id), S.deleted == false(),
               or_(S.lease_owner.is_(None), S.lease_owner == owner))
        .values(status="parked", status_reason=reason, status_version=S.status_version + 1, lease_owner=None,
                lease_expires_at=None, updated_at=func.now())
        .returning(S.status_version)
    )


def mark_session_deleted(upstream: str, session_id: str) -> Insert:
    """A tombstone even for a session never seen before, so that nothing warms it again. Returns the
    status written, or no row when the session was already deleted (nothing changed, nothing to notify)."""
    stmt = pg_insert(chat_sessions).values(
        upstream=upstream,
        session_id=session_id,
        deleted=True,
        deleted_at=func.now(),
        status="deleted",
        status_version=1,
    )
    return stmt.on_conflict_do_update(
        index_elements=[S.upstream, S.session_id],
        set_={
            "deleted": true(),
            "deleted_at": func.coalesce(S.deleted_at, func.now()),
            "status": "deleted",
            "status_version": S.status_version + 1,
            "updated_at": func.now(),
        },
        where=S.deleted == false(),
    ).returning(S.status, S.status_reason, S.status_version)


def set_title(upstream: str, session_id: str, title: str) -> Update:
    """The session's title (`session.created` / `session.updated`, docs/upstream.md §15); only a change writes."""
    return (
        chat_sessions.update()
        .where(session_key(upstream, session_id), S.title.is_distinct_from(title))
        .values(title=title, updated_at=func.now())
    )


def select_status(upstream: str, session_id: str) -> Select[Any]:
    return select(S.status, S.status_reason).where(session_key(upstream, session_id))


def select_turn_tail(upstream: str, session_id: str, limit: int) -> Select[Any]:
    """The kinds of the latest stored events, newest first: where a new owner picks the status machine up."""
    return (
        select(E.seq, E.kind)
        .where(session_events(upstream, session_id))
        .order_by(E.seq.desc())
        .limit(limit)
    )


def select_parked(upstream: str) -> Select[Any]:
    return (
        select(S.session_id, S.status, S.status_reason, S.updated_at)
        .where(S.upstream == upstream, S.status == "parked", S.deleted == false())
        .order_by(S.session_id)
    )


# --- gaps: seq ranges the sync log itself lacks (docs/lifecycle.md) ------------------------------------


def insert_gap(upstream: str, session_id: str, from_seq: int, to_seq: int) -> Insert:
    return (
        pg_insert(chat_session_gaps)
        .values(upstream=upstream, session_id=session_id, from_seq=from_seq, to_seq=to_seq)
        .on_conflict_do_nothing()
    )


def mark_incomplete(upstream: str, session_id: str) -> Update:
    return (
        chat_sessions.update().where(session_key(upstream, session_id)).values(incomplete=true(), updated_at=func.now())
    )


def select_gaps(upstream: str, session_id: str) -> Select[Any]:
    return (
        select(G.from_seq, G.to_seq)
        .where(G.upstream == upstream, G.session_id == session_id)
        .order_by(G.from_seq)
    )
