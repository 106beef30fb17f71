"""Session titles: `chat_sessions.title`, as upstream last announced it (`session.created` /
`session.updated`, docs/upstream.md §15). The `retrying` status needs no column: its attempt, next time
and message are in `status_reason` (docs/lifecycle.md).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_sessions", sa.Column("title", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("chat_sessions", "title")
