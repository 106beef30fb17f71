"""Erased sessions (docs/lifecycle.md, "Erasure"): `chat_session_tombstones`, one row per erased session
(when, who, why, how many rows left), and a trigger on every table a live event or a claim can write a
session's row into (`chat_sessions`, `chat_permission_requests`, `chat_session_errors`,
`chat_event_rejects`, `chat_session_gaps`): a row of a tombstoned session is silently not inserted,
whichever process, replica or code version writes it. `chat_session_events` needs no trigger: its writes
are fenced by the `chat_sessions` row, which can never come back.

The trigger takes a shared advisory lock on the session (the erasure holds it exclusively while it deletes),
so an insert racing with an erasure either commits before the erasure reads (and is deleted with the rest)
or waits for it and sees the tombstone. Self-contained: nothing imported from `bridge`.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GUARDED = ("chat_sessions", "chat_permission_requests", "chat_session_errors", "chat_event_rejects",
           "chat_session_gaps")

FUNCTION = """
CREATE FUNCTION bridge_skip_tombstoned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.session_id IS NULL THEN
        RETURN NEW;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(NEW.upstream || '|' || NEW.session_id, 0));
    IF EXISTS (SELECT 1 FROM chat_session_tombstones t
               WHERE t.upstream = NEW.upstream AND t.session_id = NEW.session_id) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "chat_session_tombstones",
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("root_session_id", sa.Text(), nullable=False),
        sa.Column("erased_at", postgresql.TIMESTAMP(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("erased_by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rows", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("command_id", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("upstream", "session_id", name="pk_chat_session_tombstones"),
    )
    op.execute(FUNCTION)
    for table in GUARDED:
        op.execute(f"CREATE TRIGGER skip_tombstoned BEFORE INSERT ON {table} "
                   "FOR EACH ROW EXECUTE FUNCTION bridge_skip_tombstoned()")


def downgrade() -> None:
    for table in GUARDED:
        op.execute(f"DROP TRIGGER skip_tombstoned ON {table}")
    op.execute("DROP FUNCTION bridge_skip_tombstoned()")
    op.drop_table("chat_session_tombstones")
