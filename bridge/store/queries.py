"""Every SQL statement of the bridge, as named SQLAlchemy Core constructs. Callers only execute them.

Statements are scoped by `upstream`: one database may hold several upstreams (several serves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Insert,
    Select,
    Text,
    Update,
    and_,
    any_,
    bindparam,
    false,
    func,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert

from bridge.store.schema import chat_event_rejects, chat_session_events, chat_sessions

S = chat_sessions.c
E = chat_session_events.c

SESSION_COLUMNS = (
    S.session_id,
    S.directory,
    S.cursor_seq,
    S.status,
    S.deleted,
    S.lease_owner,
    S.lease_epoch,
    S.status_reason,
    S.first_event_at,
    S.last_event_at,
    S.deleted_at,
    S.incomplete,
)


def _session_key(upstream: str, session_id: str) -> Any:
    return and_(S.upstream == upstream, S.session_id == session_id)


# --- leases -------------------------------------------------------------------------------------------


def release_session(upstream: str, session_id: str, epoch: int) -> Update:
    return (
        chat_sessions.update()
        .where(_session_key(upstream, session_id), S.lease_epoch == epoch)
        .values(lease_owner=None, lease_expires_at=None, updated_at=func.now())
    )


def lock_session_for_write(upstream: str, session_id: str) -> Select[Any]:
    """The session row, locked until the end of the transaction: writers of one session serialize here."""
    return (
        select(S.lease_epoch, S.lease_owner, S.cursor_seq).where(_session_key(upstream, session_id)).with_for_update()
    )


# --- events -------------------------------------------------------------------------------------------


def insert_events() -> Insert:
    """Execute with a list of rows (one statement per page of rows, SQLAlchemy "insertmanyvalues").
    No conflict target: a clash on the primary key (seq) and on (upstream, event_id) are both skipped,
    and RETURNING names the rows actually inserted."""
    return pg_insert(chat_session_events).on_conflict_do_nothing().returning(E.seq, E.event_id)


def stored_events_matching(
    upstream: str, session_id: str, seqs: Sequence[int], event_ids: Sequence[str]
) -> Select[Any]:
    """Stored rows that hold one of these seqs (in this session) or one of these event ids (anywhere in
    the upstream): what a skipped insert collided with."""
    # = ANY(array): two parameters whatever the batch size (IN would take one per value).
    seq_array = bindparam("seqs", list(seqs), type_=ARRAY(BigInteger))
    id_array = bindparam("event_ids", list(event_ids), type_=ARRAY(Text))
    return select(E.session_id, E.seq, E.event_id, E.payload).where(
        E.upstream == upstream,
        or_(and_(E.session_id == session_id, E.seq == any_(seq_array)), E.event_id == any_(id_array)),
    )


def advance_cursor(
    upstream: str,
    session_id: str,
    max_seq: int,
    first_event_at: datetime | None,
    last_event_at: datetime | None,
) -> Update:
    """The cursor only moves forward: replaying an older batch never moves it back."""
    return (
        chat_sessions.update()
        .where(_session_key(upstream, session_id))
        .values(
            cursor_seq=func.greatest(S.cursor_seq, max_seq),
            first_event_at=func.coalesce(S.first_event_at, first_event_at),
            last_event_at=func.greatest(S.last_event_at, last_event_at),
            updated_at=func.now(),
        )
        .returning(S.cursor_seq)
    )


def select_stored_ids(upstream: str, session_id: str) -> Select[Any]:
    return select(E.seq, E.event_id).where(E.upstream == upstream, E.session_id == session_id).order_by(E.seq)


# --- rejects ------------------------------------------------------------------------------------------


def insert_rejects(rows: Sequence[Mapping[str, Any]]) -> Insert:
    """Columns: upstream, session_id, seq, event_id, reason, detail, raw, received_at."""
    return pg_insert(chat_event_rejects).values(list(rows))


# --- sessions -----------------------------------------------------------------------------------------


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


def select_sessions(upstream: str, include_deleted: bool) -> Select[Any]:
    stmt = select(*SESSION_COLUMNS).where(S.upstream == upstream).order_by(S.session_id)
    if not include_deleted:
        stmt = stmt.where(S.deleted == false())
    return stmt


def select_session(upstream: str, session_id: str) -> Select[Any]:
    return select(*SESSION_COLUMNS).where(_session_key(upstream, session_id))


def select_seed_rows(upstream: str, session_id: str, kinds: Sequence[str]) -> Select[Any]:
    """The normalized columns of a session's rows of these kinds: what the legacy mapper's turn state is
    rebuilt from when a follower starts (bridge.legacy.SEED_KINDS)."""
    return (
        select(E.event_id, E.kind, E.part_id, E.message_id, E.assistant_message_id)
        .where(E.upstream == upstream, E.session_id == session_id, E.kind.in_(list(kinds)))
        .order_by(E.seq)
    )
