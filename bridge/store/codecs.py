"""Rows <-> Python, pure: the one view of a `chat_sessions` row (`SessionRow`, mapped by `session_row` for
every reader), the shapes the readers hand it on in (the audit API's session object, the viewer's list
entry and its keyset cursor), and text made storable for the rows the store writes itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from bridge.store.payload import storable_text


@dataclass(frozen=True)
class SessionRow:
    """A row of `chat_sessions` as the code reads it. A reader selects the columns it needs and maps the
    result with `session_row`; a column it did not select keeps its default here."""

    session_id: str
    directory: str | None = None
    cursor_seq: int = 0
    status: str = "idle"
    status_reason: str | None = None
    status_version: int = 0
    first_event_at: datetime | None = None
    last_event_at: datetime | None = None
    deleted: bool = False
    deleted_at: datetime | None = None
    incomplete: bool = False
    title: str | None = None
    lease_owner: str | None = None
    lease_epoch: int = 0
    lease_expires_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    session_day: date | None = None  # the partition of its events (docs/lifecycle.md, "Partitions")
    # Computed by the query, not stored: the lease expired by the database clock (adoption, bridge.lease);
    # events stored of the session (the audit API's session object).
    lease_expired: bool = False
    event_count: int | None = None
    parent_id: str | None = None  # from the stored seq 0 (bridge.store.chat_sessions.tree.PARENT_COLUMN)


_INTS = frozenset({"cursor_seq", "status_version", "lease_epoch", "event_count"})
_BOOLS = frozenset({"deleted", "incomplete", "lease_expired"})


def session_row(row: Any) -> SessionRow:
    """The one mapping of a selected `chat_sessions` row (its columns named as in the table)."""
    values: dict[str, Any] = {}
    for name, value in row._mapping.items():
        if name in _INTS and value is not None:
            value = int(value)
        elif name in _BOOLS:
            value = bool(value)
        values[name] = value
    return SessionRow(**values)


def row_dict(row: Any) -> dict[str, Any]:
    """Any other row as a dict of its selected columns (the audit API's events, tool calls, transcripts)."""
    return dict(row._mapping)


# The audit API's session object (docs/audit.md), in this order: the columns an auditor reads.
AUDIT_SESSION_FIELDS = (
    "session_id", "directory", "status", "status_reason", "cursor_seq", "first_event_at", "last_event_at",
    "deleted", "deleted_at", "incomplete", "created_at", "updated_at", "event_count", "title",
)


def audit_session(row: SessionRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in AUDIT_SESSION_FIELDS}


def session_list_entry(row: SessionRow) -> dict[str, Any]:
    """One session of the viewer's list (the WebSocket `sessions` answer, docs/websocket.md)."""
    return {"session": row.session_id, "head": row.cursor_seq, "status": row.status, "title": row.title,
            "parent_id": row.parent_id,
            "last_event_at": None if row.last_event_at is None else row.last_event_at.isoformat()}


def session_cursor(last_event_at: datetime | None, session_id: str) -> str:
    return f"{'' if last_event_at is None else last_event_at.isoformat()}|{session_id}"


def parse_session_cursor(cursor: str) -> tuple[datetime | None, str]:
    """The inverse of `session_cursor`; ValueError for anything else."""
    at, sep, sid = cursor.rpartition("|")
    if not sep or not sid or "\x00" in sid:
        raise ValueError("not a sessions cursor")
    if not at:
        return None, sid
    t = datetime.fromisoformat(at)
    if t.tzinfo is None:
        raise ValueError("not a sessions cursor")
    return t, sid


def opt_text(value: str | None) -> str | None:
    """Text for a `text` column that PostgreSQL can hold (bridge.store.payload.storable_text); None stays."""
    return None if value is None else storable_text(value).value
