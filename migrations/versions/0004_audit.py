"""Audit: the per-session hash chain (`chat_session_events.chain_hash`) and the audit views.

Existing events are chained here, in seq order, with the same function the writer uses.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bridge.audit.chain import GENESIS, link
from bridge.store.audit import VIEWS

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_session_events", sa.Column("chain_hash", sa.Text(), nullable=True))
    _chain_existing_events()
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_column("chat_session_events", "chain_hash")


def _chain_existing_events() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text(
        "SELECT upstream, session_id, seq, event_id, payload::text AS payload_text FROM chat_session_events "
        "ORDER BY upstream, session_id, seq"
    ))
    key: tuple[str, str] | None = None
    prev = GENESIS
    updates: list[dict[str, object]] = []
    for r in rows:
        if (r.upstream, r.session_id) != key:
            key, prev = (r.upstream, r.session_id), GENESIS
        prev = link(prev, int(r.seq), str(r.event_id), str(r.payload_text))
        updates.append({"u": r.upstream, "s": r.session_id, "q": r.seq, "h": prev})
    if updates:
        bind.execute(sa.text("UPDATE chat_session_events SET chain_hash = :h "
                             "WHERE upstream = :u AND session_id = :s AND seq = :q"), updates)
