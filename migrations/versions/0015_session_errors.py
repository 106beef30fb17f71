"""Session-level errors (`session.error`, live only upstream, docs/upstream.md §20): one row per error event
the live stream carried, for the audit (docs/audit.md, "Session errors"). Self-contained: nothing imported
from `bridge`.

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = postgresql.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "chat_session_errors",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("payload", postgresql.JSONB(), nullable=False),
        sa.Column("received_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("upstream", "event_id", name="pk_chat_session_errors"),
    )
    op.create_index("ix_chat_session_errors_session", "chat_session_errors",
                    ["upstream", "session_id", "received_at"])


def downgrade() -> None:
    op.drop_index("ix_chat_session_errors_session", table_name="chat_session_errors")
    op.drop_table("chat_session_errors")
