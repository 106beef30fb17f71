"""Tables of the WebSocket fan-out (docs/websocket.md: permission requests), on the shared metadata of
`bridge.store.schema`.

`chat_permission_requests`: permission requests are live-only upstream (`permission.v2.*` on `/api/event`
only, docs/upstream.md §4.4), so the bridge keeps them itself; a page opened later still sees a pending one.
One row per request id; `reply` is NULL while the request is pending.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, PrimaryKeyConstraint, Table, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB

from bridge.store.schema import TIMESTAMPTZ, metadata

chat_permission_requests = Table(
    "chat_permission_requests",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("action", Text, nullable=True),
    Column("assistant_message_id", Text, nullable=True),
    Column("call_id", Text, nullable=True),
    # Which runtime asked (0008): `v2` (`permission.v2.asked`, answered on the v2 endpoint) or `legacy`
    # (`permission.asked`, answered on `/permission/{id}/reply`; docs/upstream.md §16, §17).
    Column("runtime", Text, nullable=False, server_default=text("'v2'")),
    # The asking envelope exactly as received (v2: resources, save, source …; legacy: the bus event).
    Column("asked", JSONB, nullable=True),
    Column("asked_at", TIMESTAMPTZ, nullable=True),
    # once | always | reject; unknown: answered while /api/event was down (found by the re-sync); NULL: pending
    Column("reply", Text, nullable=True),
    Column("replied", JSONB, nullable=True),
    Column("replied_at", TIMESTAMPTZ, nullable=True),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("upstream", "request_id", name="pk_chat_permission_requests"),
    Index(
        "ix_chat_permission_requests_pending",
        "upstream",
        "session_id",
        postgresql_where=text("reply IS NULL"),
    ),
)

__all__ = ["chat_permission_requests", "metadata"]
