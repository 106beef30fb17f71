"""Pending requests: the permission-request table also keeps the questions of the `question` tool
(docs/upstream.md §18), and for both kinds who answered what through the bridge (docs/mirror.md, "Pending
requests"). None of it is in the upstream's sync log: this table is its only durable record.

- `kind`: `permission` (every row so far) or `question`;
- `answer`: a question's answers (one list of strings per question), as sent upstream or as announced;
- `answered_by`: the token subject of the bridge command that answered it (NULL: answered elsewhere).

For a question `reply` is `answered`, `rejected` or `unknown` (settled while the bridge was away).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "chat_permission_requests"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("kind", sa.Text(), nullable=False, server_default=sa.text("'permission'")))
    op.add_column(TABLE, sa.Column("answer", postgresql.JSONB(), nullable=True))
    op.add_column(TABLE, sa.Column("answered_by", sa.Text(), nullable=True))
    # Operators look for requests pending long (docs/operations.md): every pending one, oldest first.
    op.create_index("ix_chat_permission_requests_pending_age", TABLE, ["asked_at"],
                    postgresql_where=sa.text("reply IS NULL"))


def downgrade() -> None:
    op.drop_index("ix_chat_permission_requests_pending_age", table_name=TABLE)
    op.execute(f"DELETE FROM {TABLE} WHERE kind <> 'permission'")
    op.drop_column(TABLE, "answered_by")
    op.drop_column(TABLE, "answer")
    op.drop_column(TABLE, "kind")
