"""Tool-call index: `audit_tool_calls` finds each call's outcome with a lateral lookup by
`(upstream, session_id, call_id)` and `seq > called_seq`; without an index on `call_id` every call scans
the later events of its session (docs/audit.md). Partial: only rows that carry a call id.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_chat_session_events_call"


def upgrade() -> None:
    op.create_index(INDEX, "chat_session_events", ["upstream", "session_id", "call_id", "seq"],
                    postgresql_where=sa.text("call_id IS NOT NULL"))


def downgrade() -> None:
    op.drop_index(INDEX, table_name="chat_session_events")
