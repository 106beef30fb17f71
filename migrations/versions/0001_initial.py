"""Initial schema: chat_sessions, chat_session_events, chat_event_rejects.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMPTZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "chat_sessions",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("directory", sa.Text(), nullable=True),
        sa.Column("cursor_seq", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'idle'"), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("first_event_at", TIMESTAMPTZ, nullable=True),
        sa.Column("last_event_at", TIMESTAMPTZ, nullable=True),
        sa.Column("deleted", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("deleted_at", TIMESTAMPTZ, nullable=True),
        sa.Column("incomplete", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_epoch", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("lease_expires_at", TIMESTAMPTZ, nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("upstream", "session_id", name="pk_chat_sessions"),
    )

    op.create_table(
        "chat_session_events",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=True),
        sa.Column("event_time", TIMESTAMPTZ, nullable=True),
        sa.Column("received_at", TIMESTAMPTZ, nullable=False),
        sa.Column("stored_at", TIMESTAMPTZ, server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=True),
        sa.Column("assistant_message_id", sa.Text(), nullable=True),
        sa.Column("part_id", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("finish", sa.Text(), nullable=True),
        sa.Column("tokens_input", sa.BigInteger(), nullable=True),
        sa.Column("tokens_output", sa.BigInteger(), nullable=True),
        sa.Column("tokens_reasoning", sa.BigInteger(), nullable=True),
        sa.Column("tokens_cache_read", sa.BigInteger(), nullable=True),
        sa.Column("tokens_cache_write", sa.BigInteger(), nullable=True),
        sa.Column("cost", sa.Double(), nullable=True),
        sa.Column("delivery", sa.Text(), nullable=True),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("model_id", sa.Text(), nullable=True),
        sa.Column("provider_id", sa.Text(), nullable=True),
        sa.Column("payload", JSONB(), nullable=False),
        sa.Column("payload_lossy", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.PrimaryKeyConstraint("upstream", "session_id", "seq", name="pk_chat_session_events"),
        sa.UniqueConstraint("upstream", "event_id", name="uq_chat_session_events_upstream_event_id"),
    )
    op.create_index(
        "ix_chat_session_events_session_time", "chat_session_events", ["upstream", "session_id", "event_time"]
    )
    op.create_index(
        "ix_chat_session_events_tool_time",
        "chat_session_events",
        ["tool_name", "event_time"],
        postgresql_where=sa.text("tool_name IS NOT NULL"),
    )
    op.create_index("ix_chat_session_events_event_time", "chat_session_events", ["event_time"])
    op.create_index("ix_chat_session_events_kind", "chat_session_events", ["kind"])

    op.create_table(
        "chat_event_rejects",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),  # bigserial
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=True),
        sa.Column("event_id", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("received_at", TIMESTAMPTZ, nullable=False),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_chat_event_rejects"),
    )
    op.create_index("ix_chat_event_rejects_session", "chat_event_rejects", ["upstream", "session_id"])


def downgrade() -> None:
    op.drop_table("chat_event_rejects")
    op.drop_table("chat_session_events")
    op.drop_table("chat_sessions")
