"""Audit views over both runtimes: `audit_prompts`, `audit_tool_calls`, `audit_texts` redefined, and
`audit_steps` added, so that turns driven through the legacy API (docs/legacy.md) are listed like v2 turns
(docs/audit.md). Rows are selected by their normalized columns (`kind`, `call_id`, `message_id`, `finish`,
tokens, `cost`, `error_type`, `error_message`); what has no column (a prompt's or a text's text, a tool's
input and output) is read from the payload of whichever shape the row has: a v2 durable envelope
(`data.prompt.text`, `data.text`, `data.input`, `data.content`) or a legacy sync-log item (`data.part`:
`text`, `state.input`, `state.output`, `state.time`). A legacy prompt is taken when its first step starts;
a legacy tool first seen ended is a call too. `chat_permission_requests.runtime` records which runtime
asked a permission (`v2`: `permission.v2.asked`, answered on `/api/session/{id}/permission/{id}/reply`;
`legacy`: `permission.asked`, answered on `/permission/{id}/reply`, docs/upstream.md §16, §17).

Self-contained (no import from the application): the views as 0004 created them are repeated below for
the downgrade.

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEGACY_PART = "'message.part.updated'"  # the `type` of a stored legacy part update

# A JSON number (payload data) as a bigint, or NULL when it is not one or out of range: a view must not
# fail on one odd row.
_MS = "CASE WHEN jsonb_typeof({x}) = 'number' AND abs(({x})::text::numeric) < 1e15 " \
      "THEN round(({x})::text::numeric)::bigint END"

VIEWS: dict[str, str] = {
    "audit_prompts": f"""
SELECT a.upstream, a.session_id, a.message_id,
       CASE WHEN a.type = {LEGACY_PART} THEN a.payload->'data'->'part'->>'text'
            ELSE a.payload->'data'->'prompt'->>'text' END AS text,
       a.delivery,
       a.seq AS admitted_seq, a.event_time AS admitted_at,
       p.seq AS started_seq, p.event_time AS started_at
FROM chat_session_events a
LEFT JOIN LATERAL (
    -- v2: prompt:started; legacy (no such event): the first step of the turn
    SELECT s.seq, s.event_time FROM chat_session_events s
    WHERE s.upstream = a.upstream AND s.session_id = a.session_id AND s.message_id = a.message_id
      AND s.kind IN ('prompt:started', 'step:start') AND s.seq > a.seq
    ORDER BY s.seq LIMIT 1
) p ON true
WHERE a.kind = 'prompt:admitted'
""",
    "audit_tool_calls": f"""
SELECT c.upstream, c.session_id, c.call_id, c.tool_name AS tool,
       CASE WHEN c.type = {LEGACY_PART} THEN c.payload->'data'->'part'->'state'->'input'
            ELSE c.payload->'data'->'input' END AS input,
       c.assistant_message_id,
       c.seq AS called_seq, c.event_time AS called_at,
       CASE r.kind WHEN 'tool:success' THEN 'success' WHEN 'tool:fail' THEN 'failed' ELSE 'pending' END
           AS outcome,
       CASE WHEN r.type = {LEGACY_PART} THEN r.payload->'data'->'part'->'state'->>'output'
       ELSE COALESCE(
           CASE WHEN jsonb_typeof(r.payload->'data'->'content') = 'array' THEN
               (SELECT string_agg(x->>'text', '' ORDER BY n)
                FROM jsonb_array_elements(r.payload->'data'->'content') WITH ORDINALITY AS t(x, n)
                WHERE x->>'type' = 'text')
           END,
           -- tools without text parts (read) return their output in structured.content
           CASE WHEN jsonb_typeof(r.payload->'data'->'structured'->'content') = 'string'
                THEN r.payload->'data'->'structured'->>'content' END
       ) END AS output_text,
       CASE WHEN r.type = {LEGACY_PART} THEN NULL ELSE r.payload->'data'->'content' END AS output,
       CASE WHEN r.type = {LEGACY_PART} THEN r.payload->'data'->'part'->'state'->'metadata'
            ELSE r.payload->'data'->'structured' END AS structured,
       r.error_type, r.error_message,
       r.seq AS finished_seq, r.event_time AS finished_at,
       CASE WHEN r.type = {LEGACY_PART}
            THEN {_MS.format(x="r.payload->'data'->'part'->'state'->'time'->'end'")}
                 - {_MS.format(x="r.payload->'data'->'part'->'state'->'time'->'start'")}
            ELSE (extract(epoch FROM r.event_time - c.event_time) * 1000)::bigint END AS duration_ms
FROM chat_session_events c
LEFT JOIN LATERAL (
    SELECT f.kind, f.type, f.payload, f.error_type, f.error_message, f.seq, f.event_time
    FROM chat_session_events f
    WHERE f.upstream = c.upstream AND f.session_id = c.session_id AND f.call_id = c.call_id
      AND f.kind IN ('tool:success', 'tool:fail') AND f.seq >= c.seq
    ORDER BY f.seq LIMIT 1
) r ON true
WHERE c.kind = 'tool:start'
   OR (c.kind IN ('tool:success', 'tool:fail') AND NOT EXISTS (
        -- a call first seen ended (a legacy part that skipped `running`) is listed from its end
        SELECT 1 FROM chat_session_events s
        WHERE s.upstream = c.upstream AND s.session_id = c.session_id AND s.call_id = c.call_id
          AND s.kind = 'tool:start' AND s.seq < c.seq))
""",
    "audit_texts": f"""
SELECT t.upstream, t.session_id, t.assistant_message_id, t.part_id,
       CASE t.kind WHEN 'text:end' THEN 'text' ELSE 'reasoning' END AS part,
       CASE WHEN t.type = {LEGACY_PART} THEN t.payload->'data'->'part'->>'text'
            ELSE t.payload->'data'->>'text' END AS text,
       t.seq, t.event_time
FROM chat_session_events t
WHERE t.kind IN ('text:end', 'reasoning:end')
""",
    "audit_steps": """
SELECT e.upstream, e.session_id, e.assistant_message_id,
       CASE e.kind WHEN 'step:end' THEN e.finish ELSE 'error' END AS finish,
       e.tokens_input, e.tokens_output, e.tokens_reasoning, e.tokens_cache_read, e.tokens_cache_write,
       e.cost, e.error_type, e.error_message,
       e.seq, e.event_time
FROM chat_session_events e
WHERE e.kind IN ('step:end', 'step:fail')
""",
}

# The views as migration 0004 created them (v2 payload fields only).
OLD_VIEWS: dict[str, str] = {
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
    for name in OLD_VIEWS:  # columns change: CREATE OR REPLACE cannot rename or reorder them
        op.execute(f"DROP VIEW IF EXISTS {name}")
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")
    op.add_column("chat_permission_requests",
                  sa.Column("runtime", sa.Text(), nullable=False, server_default=sa.text("'v2'")))


def downgrade() -> None:
    op.drop_column("chat_permission_requests", "runtime")
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
    for name, body in OLD_VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")
