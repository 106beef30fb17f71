"""The tables, as SQLAlchemy Core metadata. Migrations (`migrations/versions/`) must produce exactly this;
`tests/integration/test_migrations.py` compares the two.

`chat_session_events.payload` is the envelope exactly as received (README.md, "Data"), except that PostgreSQL
`jsonb` cannot hold some strings (NUL); such payloads are stored with a replacement character and
`payload_lossy = true`, and the exact text is kept in `chat_event_rejects` (see `bridge.store.payload`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP

TIMESTAMPTZ = TIMESTAMP(timezone=True)

metadata = MetaData()

chat_sessions = Table(
    "chat_sessions",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("directory", Text, nullable=True),
    # Last durable seq stored for this session: the follower resumes with `after=cursor_seq`.
    Column("cursor_seq", BigInteger, nullable=False, server_default=text("0")),
    Column("status", Text, nullable=False, server_default=text("'idle'")),
    Column("status_reason", Text, nullable=True),
    # Moves on with every status write (0005): subscribers of any process keep the newest status only.
    Column("status_version", BigInteger, nullable=False, server_default=text("0")),
    Column("first_event_at", TIMESTAMPTZ, nullable=True),
    Column("last_event_at", TIMESTAMPTZ, nullable=True),
    Column("deleted", Boolean, nullable=False, server_default=false()),
    Column("deleted_at", TIMESTAMPTZ, nullable=True),
    # Set when history before the stored cursor is known to be missing (legacy gaps, docs/lifecycle.md).
    Column("incomplete", Boolean, nullable=False, server_default=false()),
    # The session's title as upstream last announced it (session.created / session.updated; 0010).
    Column("title", Text, nullable=True),
    # Lease with fencing token: every write batch must present the current lease_epoch.
    Column("lease_owner", Text, nullable=True),
    Column("lease_epoch", BigInteger, nullable=False, server_default=text("0")),
    Column("lease_expires_at", TIMESTAMPTZ, nullable=True),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("upstream", "session_id", name="pk_chat_sessions"),
)

chat_session_events = Table(
    "chat_session_events",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("schema_version", Integer, nullable=True),
    Column("event_time", TIMESTAMPTZ, nullable=True),
    Column("received_at", TIMESTAMPTZ, nullable=False),
    Column("stored_at", TIMESTAMPTZ, nullable=False, server_default=func.clock_timestamp()),
    Column("message_id", Text, nullable=True),
    Column("assistant_message_id", Text, nullable=True),
    Column("part_id", Text, nullable=True),
    Column("call_id", Text, nullable=True),
    Column("tool_name", Text, nullable=True),
    Column("error_type", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("finish", Text, nullable=True),
    Column("tokens_input", BigInteger, nullable=True),
    Column("tokens_output", BigInteger, nullable=True),
    Column("tokens_reasoning", BigInteger, nullable=True),
    Column("tokens_cache_read", BigInteger, nullable=True),
    Column("tokens_cache_write", BigInteger, nullable=True),
    Column("cost", Double, nullable=True),
    Column("delivery", Text, nullable=True),
    Column("agent", Text, nullable=True),
    Column("model_id", Text, nullable=True),
    Column("provider_id", Text, nullable=True),
    Column("payload", JSONB, nullable=False),
    Column("payload_lossy", Boolean, nullable=False, server_default=false()),
    # Tamper evidence (docs/audit.md, bridge.audit.chain): link of the per-session hash chain, set in write_batch.
    Column("chain_hash", Text, nullable=True),
    PrimaryKeyConstraint("upstream", "session_id", "seq", name="pk_chat_session_events"),
    # The same event has the same id on every upstream stream (docs/upstream.md §2): a dedupe key.
    UniqueConstraint("upstream", "event_id", name="uq_chat_session_events_upstream_event_id"),
    Index("ix_chat_session_events_session_time", "upstream", "session_id", "event_time"),
    Index(
        "ix_chat_session_events_tool_time",
        "tool_name",
        "event_time",
        postgresql_where=text("tool_name IS NOT NULL"),
    ),
    Index("ix_chat_session_events_event_time", "event_time"),
    Index("ix_chat_session_events_kind", "kind"),
    # The outcome of each tool call (audit_tool_calls' lateral lookup): migration 0006.
    Index(
        "ix_chat_session_events_call",
        "upstream",
        "session_id",
        "call_id",
        "seq",
        postgresql_where=text("call_id IS NOT NULL"),
    ),
)

chat_event_rejects = Table(
    "chat_event_rejects",
    metadata,
    Column("id", BigInteger, nullable=False, autoincrement=True),  # bigserial
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=True),
    Column("seq", BigInteger, nullable=True),
    Column("event_id", Text, nullable=True),
    Column("reason", Text, nullable=False),
    Column("detail", Text, nullable=True),
    # The frame text, or the exact JSON text of the envelope: nothing is lost.
    Column("raw", Text, nullable=False),
    Column("received_at", TIMESTAMPTZ, nullable=False),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("id", name="pk_chat_event_rejects"),
    Index("ix_chat_event_rejects_session", "upstream", "session_id"),
)

# Tables of the lifecycle, fan-out, audit and command features live in their own modules on this same
# metadata; importing them here makes `metadata` complete for Alembic and the migration test.
from bridge.store import schema_audit, schema_commands, schema_fanout, schema_lifecycle  # noqa: E402, F401
