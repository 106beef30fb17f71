"""Warm-session lifecycle: incarnations (heartbeat rows) and legacy seq gaps. Leases and status use chat_sessions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TIMESTAMP

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMPTZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "bridge_incarnations",
        sa.Column("incarnation_id", sa.Text(), nullable=False),
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("heartbeat_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", TIMESTAMPTZ, nullable=False),
        sa.Column("stopped_at", TIMESTAMPTZ, nullable=True),
        sa.PrimaryKeyConstraint("incarnation_id", name="pk_bridge_incarnations"),
    )
    op.create_index("ix_bridge_incarnations_upstream_expires", "bridge_incarnations", ["upstream", "expires_at"])
    op.create_table(
        "chat_session_gaps",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("from_seq", sa.BigInteger(), nullable=False),
        sa.Column("to_seq", sa.BigInteger(), nullable=False),
        sa.Column("detected_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("upstream", "session_id", "from_seq", name="pk_chat_session_gaps"),
    )


def downgrade() -> None:
    op.drop_table("chat_session_gaps")
    op.drop_index("ix_bridge_incarnations_upstream_expires", table_name="bridge_incarnations")
    op.drop_table("bridge_incarnations")
