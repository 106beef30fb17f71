"""The send claim of a legacy prompt row (docs/commands.md, "Exactly once", "The send claim"): which sender
holds the row (`send_token`, one per delivery attempt) and since when by the database's clock
(`send_claimed_at`). Taken and renewed by compare-and-set under the row lock; it replaces the advisory
lock as the fence, since a session-level advisory lock dies with its connection while its holder goes
on. Self-contained: nothing imported from `bridge`.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_commands", sa.Column("send_token", sa.Text(), nullable=True))
    op.add_column("chat_commands", sa.Column("send_claimed_at", postgresql.TIMESTAMP(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("chat_commands", "send_claimed_at")
    op.drop_column("chat_commands", "send_token")
