"""Security: a `command_id` belongs to its sender and target session (`chat_commands` keyed by upstream,
subject, target_session, command_id), and the revoked tokens (`bridge_revoked_tokens`, docs/security.md).
Self-contained: nothing imported from `bridge`.

Revision ID: 0013
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = postgresql.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.add_column("chat_commands", sa.Column("target_session", sa.Text(), nullable=False,
                                             server_default=sa.text("''")))
    # Rows written before: the session of the path was session_id, except for a created session.
    op.execute("UPDATE chat_commands SET target_session = COALESCE(session_id, '') "
               "WHERE command <> 'create_session'")
    op.drop_constraint("pk_chat_commands", "chat_commands", type_="primary")
    op.create_primary_key("pk_chat_commands", "chat_commands",
                          ["upstream", "subject", "target_session", "command_id"])
    op.create_table(
        "bridge_revoked_tokens",
        sa.Column("jti", sa.Text(), nullable=False),
        sa.Column("revoked_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("reason", sa.Text(), nullable=False, server_default=sa.text("''")),
        sa.PrimaryKeyConstraint("jti", name="pk_bridge_revoked_tokens"),
    )


def downgrade() -> None:
    op.drop_table("bridge_revoked_tokens")
    # Ids unique per upstream again: keep the oldest row of each (upstream, command_id).
    op.execute("DELETE FROM chat_commands c USING chat_commands d WHERE c.upstream = d.upstream "
               "AND c.command_id = d.command_id AND (c.created_at, c.subject, c.target_session) "
               "> (d.created_at, d.subject, d.target_session)")
    op.drop_constraint("pk_chat_commands", "chat_commands", type_="primary")
    op.create_primary_key("pk_chat_commands", "chat_commands", ["upstream", "command_id"])
    op.drop_column("chat_commands", "target_session")
