"""Commands through the bridge: `chat_commands`, one row per command with who sent it, what, when and
the result (docs/commands.md). Self-contained: nothing imported from `bridge`.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = postgresql.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "chat_commands",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("command_id", sa.Text(), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("body", postgresql.JSONB(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("upstream_id", sa.Text(), nullable=True),
        sa.Column("upstream_status", sa.Integer(), nullable=True),
        sa.Column("admitted_seq", sa.BigInteger(), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("result", postgresql.JSONB(), nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("completed_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("upstream", "command_id", name="pk_chat_commands"),
    )
    op.create_index("ix_chat_commands_session", "chat_commands", ["upstream", "session_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_chat_commands_session", table_name="chat_commands")
    op.drop_table("chat_commands")
