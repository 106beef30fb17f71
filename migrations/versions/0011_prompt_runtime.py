"""Prompts on both runtimes (docs/commands.md, "Runtime affinity", "The legacy queue"): the runtime a
prompt was sent through (`chat_commands.runtime`), when it reached the upstream (`sent_at`), and an index
of the queued legacy prompts, read in order per session by the queue's sender. `state` gains `queued`
and `sending` (text column: no type change).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_commands", sa.Column("runtime", sa.Text(), nullable=True))
    op.add_column("chat_commands", sa.Column("sent_at", postgresql.TIMESTAMP(timezone=True), nullable=True))
    op.create_index("ix_chat_commands_queued", "chat_commands", ["upstream", "session_id", "created_at"],
                    postgresql_where=sa.text("state IN ('queued', 'sending')"))


def downgrade() -> None:
    op.drop_index("ix_chat_commands_queued", table_name="chat_commands")
    op.drop_column("chat_commands", "sent_at")
    op.drop_column("chat_commands", "runtime")
