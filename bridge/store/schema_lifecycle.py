"""Tables of the warm-session lifecycle (incarnations, legacy gaps; docs/lifecycle.md) on the metadata of
`bridge.store.schema`.

Leases themselves live on `chat_sessions` (lease_owner, lease_epoch, lease_expires_at); the session
status is `chat_sessions.status` / `status_reason`. See docs/lifecycle.md.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, PrimaryKeyConstraint, Table, Text, func

from bridge.store.schema import TIMESTAMPTZ, metadata

# One row per bridge process start. The heartbeat renews `expires_at` (and every lease the incarnation
# holds); a clean shutdown sets `stopped_at`. Operators read it to see who is alive and owns what.
bridge_incarnations = Table(
    "bridge_incarnations",
    metadata,
    Column("incarnation_id", Text, nullable=False),
    Column("upstream", Text, nullable=False),
    Column("hostname", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("heartbeat_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("expires_at", TIMESTAMPTZ, nullable=False),
    Column("stopped_at", TIMESTAMPTZ, nullable=True),
    PrimaryKeyConstraint("incarnation_id", name="pk_bridge_incarnations"),
    Index("ix_bridge_incarnations_upstream_expires", "upstream", "expires_at"),
)

# Seq ranges of a session that the durable stream never delivered (legacy-driven turns burn seqs that
# not on the durable stream, docs/upstream.md §3.1, §5): the mirror is incomplete there.
chat_session_gaps = Table(
    "chat_session_gaps",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("from_seq", BigInteger, nullable=False),
    Column("to_seq", BigInteger, nullable=False),
    Column("detected_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("upstream", "session_id", "from_seq", name="pk_chat_session_gaps"),
)

__all__ = ["bridge_incarnations", "chat_session_gaps", "metadata"]
