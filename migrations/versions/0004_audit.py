"""Audit: the per-session hash chain (`chat_session_events.chain_hash`) and the audit views.

Existing events are chained here, in seq order, with the same function the writer uses.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Frozen copies (a migration must not change when the code does): bridge.store.hash_chain.link and GENESIS,
# and the views as they were defined when this revision was written.
GENESIS = "0" * 64


def link(prev: str, seq: int, event_id: str, payload_text: str) -> str:
    h = hashlib.sha256()
    h.update(f"{prev}\n{seq}\n{event_id}\n".encode())
    h.update(payload_text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


VIEWS: dict[str, str] = {
    "audit_prompts": """
SELECT a.upstream, a.session_id, a.message_id,
       a.payload->'data'->'prompt'->>'text' AS text,
       a.delivery,
       a.seq AS admitted_seq, a.event_time AS admitted_at,
       p.seq AS started_seq, p.event_time AS started_at
FROM chat_session_events a
LEFT JOIN LATERAL (
    SELECT s.seq, s.event_time FROM chat_session_events s
    WHERE s.upstream = a.upstream AND s.session_id = a.session_id AND s.kind = 'prompt:started'
      AND s.message_id = a.message_id
    ORDER BY s.seq LIMIT 1
) p ON true
WHERE a.kind = 'prompt:admitted'
""",
    "audit_tool_calls": """
SELECT c.upstream, c.session_id, c.call_id, c.tool_name AS tool,
       c.payload->'data'->'input' AS input,
       c.assistant_message_id,
       c.seq AS called_seq, c.event_time AS called_at,
       CASE r.kind WHEN 'tool:success' THEN 'success' WHEN 'tool:fail' THEN 'failed' ELSE 'pending' END
           AS outcome,
       COALESCE(
           CASE WHEN jsonb_typeof(r.payload->'data'->'content') = 'array' THEN
               (SELECT string_agg(x->>'text', '' ORDER BY n)
                FROM jsonb_array_elements(r.payload->'data'->'content') WITH ORDINALITY AS t(x, n)
                WHERE x->>'type' = 'text')
           END,
           -- tools without text parts (read) return their output in structured.content
           CASE WHEN jsonb_typeof(r.payload->'data'->'structured'->'content') = 'string'
                THEN r.payload->'data'->'structured'->>'content' END
       ) AS output_text,
       r.payload->'data'->'content' AS output,
       r.payload->'data'->'structured' AS structured,
       r.error_type, r.error_message,
       r.seq AS finished_seq, r.event_time AS finished_at
FROM chat_session_events c
LEFT JOIN LATERAL (
    SELECT f.kind, f.payload, f.error_type, f.error_message, f.seq, f.event_time
    FROM chat_session_events f
    WHERE f.upstream = c.upstream AND f.session_id = c.session_id AND f.call_id = c.call_id
      AND f.kind IN ('tool:success', 'tool:fail') AND f.seq > c.seq
    ORDER BY f.seq LIMIT 1
) r ON true
WHERE c.kind = 'tool:start'
""",
    "audit_texts": """
SELECT t.upstream, t.session_id, t.assistant_message_id, t.part_id,
       CASE t.kind WHEN 'text:end' THEN 'text' ELSE 'reasoning' END AS part,
       t.payload->'data'->>'text' AS text,
       t.seq, t.event_time
FROM chat_session_events t
WHERE t.kind IN ('text:end', 'reasoning:end')
""",
}


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
