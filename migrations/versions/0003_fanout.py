"""WebSocket fan-out: permission requests and WebSocket fan-out.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMPTZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "chat_permission_requests",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=True),
        sa.Column("assistant_message_id", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("asked", JSONB(), nullable=True),
        sa.Column("asked_at", TIMESTAMPTZ, nullable=True),
        sa.Column("reply", sa.Text(), nullable=True),
        sa.Column("replied", JSONB(), nullable=True),
        sa.Column("replied_at", TIMESTAMPTZ, nullable=True),
        sa.Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("upstream", "request_id", name="pk_chat_permission_requests"),
    )
    op.create_index(
        "ix_chat_permission_requests_pending",
        "chat_permission_requests",
        ["upstream", "session_id"],
        postgresql_where=sa.text("reply IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_chat_permission_requests_pending", table_name="chat_permission_requests")
    op.drop_table("chat_permission_requests")
