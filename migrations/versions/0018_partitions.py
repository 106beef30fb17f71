"""Partitions of `chat_session_events` by `session_day` (docs/lifecycle.md, "Partitions").

- `chat_sessions.session_day date`: the UTC day the row is created (rows already there: `1970-01-01`, the
  legacy day); every event row of the session carries it.
- `chat_session_events` becomes a table `PARTITION BY RANGE (session_day)`; the table as it was becomes its
  partition `chat_session_events_legacy` (every day before `1970-01-02`): no row is copied here. Its rows
  get `session_day = 1970-01-01` as a default (no rewrite); the two unique keys now hold `session_day`, and
  `(upstream, event_id)` becomes `(upstream, session_id, event_id, session_day)` — their indexes are the
  only thing built (on a large table: the time of two index builds, BENCHMARKS.md). The other indexes of
  the old table are taken over as they are. `opencode-bridge partition-migrate` later moves the legacy
  sessions into day partitions while the bridge runs.
- `chat_session_events_default`: where a row whose day has no partition goes (the bridge creates each
  day's partition ahead, and reports rows found here).
- Views reading the table are recreated (a renamed table keeps its views: they would read the legacy
  partition only).

Self-contained: nothing imported from `bridge`.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEGACY_DAY = "1970-01-01"  # not year 1: asyncpg maps date.min to -infinity
COLUMNS_WITHOUT_KEY = """
    upstream text NOT NULL, session_id text NOT NULL, seq bigint NOT NULL, event_id text NOT NULL,
    type text NOT NULL, kind text NOT NULL, schema_version integer, event_time timestamptz,
    received_at timestamptz NOT NULL, stored_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    message_id text, assistant_message_id text, part_id text, call_id text, tool_name text, error_type text,
    error_message text, finish text, tokens_input bigint, tokens_output bigint, tokens_reasoning bigint,
    tokens_cache_read bigint, tokens_cache_write bigint, cost double precision, delivery text, agent text,
    model_id text, provider_id text, payload jsonb NOT NULL, payload_lossy boolean NOT NULL DEFAULT false,
    chain_hash text"""
# The indexes that do not hold the key: the same on the old table and the partitioned one.
INDEXES = (
    ("ix_chat_session_events_session_time", "(upstream, session_id, event_time)", ""),
    ("ix_chat_session_events_tool_time", "(tool_name, event_time)", " WHERE tool_name IS NOT NULL"),
    ("ix_chat_session_events_event_time", "(event_time)", ""),
    ("ix_chat_session_events_kind", "(kind)", ""),
    ("ix_chat_session_events_call", "(upstream, session_id, call_id, seq)", " WHERE call_id IS NOT NULL"),
)

VIEWS = """
SELECT DISTINCT v.relname, v.oid FROM pg_depend d
JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class
WHERE d.refobjid = 'chat_session_events'::regclass AND v.relkind = 'v' ORDER BY v.oid
"""


def _views() -> list[tuple[str, str]]:
    bind = op.get_bind()
    names = [str(r[0]) for r in bind.execute(text(VIEWS))]
    return [(n, str(bind.execute(text("SELECT pg_get_viewdef(CAST(:n AS regclass))"), {"n": n}).scalar_one()))
            for n in names]


def _drop_views(views: list[tuple[str, str]]) -> None:
    for name, _ in reversed(views):
        op.execute(f"DROP VIEW {name}")


def _create_views(views: list[tuple[str, str]]) -> None:
    for name, body in views:
        op.execute(f"CREATE VIEW {name} AS {body}")


def upgrade() -> None:
    op.execute(f"ALTER TABLE chat_sessions ADD COLUMN session_day date NOT NULL DEFAULT DATE '{LEGACY_DAY}'")
    op.execute("ALTER TABLE chat_sessions ALTER COLUMN session_day SET DEFAULT ((now() AT TIME ZONE 'UTC'))::date")
    views = _views()
    _drop_views(views)
    op.execute("ALTER TABLE chat_session_events RENAME TO chat_session_events_legacy")
    op.execute("ALTER TABLE chat_session_events_legacy "
               f"ADD COLUMN session_day date NOT NULL DEFAULT DATE '{LEGACY_DAY}'")
    op.execute("ALTER TABLE chat_session_events_legacy ALTER COLUMN session_day DROP DEFAULT")
    # Superseded by the keys below (built at the ATTACH): the same uniqueness within the legacy day. The whole
    # migration holds the table's ACCESS EXCLUSIVE lock: no write sees it without a key.
    op.execute("ALTER TABLE chat_session_events_legacy DROP CONSTRAINT pk_chat_session_events")
    op.execute("ALTER TABLE chat_session_events_legacy DROP CONSTRAINT uq_chat_session_events_upstream_event_id")
    for name, _, _ in INDEXES:
        op.execute(f"ALTER INDEX {name} RENAME TO {name.replace('ix_', 'ixl_', 1)}")
    op.execute(f"""CREATE TABLE chat_session_events ({COLUMNS_WITHOUT_KEY}, session_day date NOT NULL,
        CONSTRAINT pk_chat_session_events PRIMARY KEY (upstream, session_id, seq, session_day),
        CONSTRAINT uq_chat_session_events_event_id UNIQUE (upstream, session_id, event_id, session_day)
    ) PARTITION BY RANGE (session_day)""")
    for name, columns, where in INDEXES:
        op.execute(f"CREATE INDEX {name} ON chat_session_events {columns}{where}")
    op.execute("ALTER TABLE chat_session_events ATTACH PARTITION chat_session_events_legacy "
               f"FOR VALUES FROM (MINVALUE) TO ('{LEGACY_DAY}'::date + 1)")
    op.execute("CREATE TABLE chat_session_events_default PARTITION OF chat_session_events DEFAULT")
    _create_views(views)


def downgrade() -> None:
    views = _views()
    _drop_views(views)
    op.execute("ALTER TABLE chat_session_events RENAME TO chat_session_events_partitioned")
    op.execute("ALTER TABLE chat_session_events_partitioned DROP CONSTRAINT pk_chat_session_events")
    op.execute("ALTER TABLE chat_session_events_partitioned DROP CONSTRAINT uq_chat_session_events_event_id")
    for name, _, _ in INDEXES:
        op.execute(f"DROP INDEX {name}")
    op.execute(f"CREATE TABLE chat_session_events ({COLUMNS_WITHOUT_KEY},"
               " CONSTRAINT pk_chat_session_events PRIMARY KEY (upstream, session_id, seq),"
               " CONSTRAINT uq_chat_session_events_upstream_event_id UNIQUE (upstream, event_id))")
    op.execute("INSERT INTO chat_session_events SELECT upstream, session_id, seq, event_id, type, kind, schema_version,"
               " event_time, received_at, stored_at, message_id, assistant_message_id, part_id, call_id, tool_name,"
               " error_type, error_message, finish, tokens_input, tokens_output, tokens_reasoning, tokens_cache_read,"
               " tokens_cache_write, cost, delivery, agent, model_id, provider_id, payload, payload_lossy, chain_hash"
               " FROM chat_session_events_partitioned")
    op.execute("DROP TABLE chat_session_events_partitioned")  # its partitions with it
    for name, columns, where in INDEXES:
        op.execute(f"CREATE INDEX {name} ON chat_session_events {columns}{where}")
    _create_views(views)
    op.execute("ALTER TABLE chat_sessions DROP COLUMN session_day")
