"""Status versions: `chat_sessions.status_version` moves on with every status write, so that the status
pushed to WebSocket subscribers by any bridge process (PostgreSQL NOTIFY `bridge_status`) is never older
than one they already have (docs/websocket.md).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "chat_sessions", sa.Column("status_version", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
    )


def downgrade() -> None:
    op.drop_column("chat_sessions", "status_version")
