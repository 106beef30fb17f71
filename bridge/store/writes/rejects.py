"""Statements of the write path besides `bridge.store.writes.transaction`'s own, as named SQLAlchemy Core constructs:
the stored rows a skipped insert collided with (bridge.store.writes.duplicates) and the rejects.

Statements are scoped by `upstream`: one database may hold several upstreams (several serves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from sqlalchemy import BigInteger, Insert, Select, Text, any_, bindparam, or_, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert

from bridge.store.schema import chat_event_rejects, chat_session_events

E = chat_session_events.c


def stored_events_matching(
    upstream: str, session_id: str, day: date, seqs: Sequence[int], event_ids: Sequence[str]
) -> Select[Any]:
    """Stored rows of this session (its one partition) that hold one of these seqs or event ids: what a
    skipped insert collided with. An event id is unique per session (docs/lifecycle.md, "Partitions")."""
    # = ANY(array): two parameters whatever the batch size (IN would take one per value).
    seq_array = bindparam("seqs", list(seqs), type_=ARRAY(BigInteger))
    id_array = bindparam("event_ids", list(event_ids), type_=ARRAY(Text))
    return select(E.session_id, E.seq, E.event_id, E.payload).where(
        E.upstream == upstream, E.session_id == session_id, E.session_day == day,
        or_(E.seq == any_(seq_array), E.event_id == any_(id_array)),
    )


def insert_rejects(rows: Sequence[Mapping[str, Any]]) -> Insert:
    """Columns: upstream, session_id, seq, event_id, reason, detail, raw, received_at."""
    return pg_insert(chat_event_rejects).values(list(rows))
