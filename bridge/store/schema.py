"""The tables, as SQLAlchemy Core metadata. Migrations (`migrations/versions/`) must produce exactly this;
`tests/integration/test_migrations.py` compares the two.

`chat_session_events.payload` is the envelope exactly as received (README.md, "Data"), except that PostgreSQL
`jsonb` cannot hold some strings (NUL); such payloads are stored with a replacement character and
`payload_lossy = true`, and the exact text is kept in `chat_event_rejects` (see `bridge.store.payload`).

Every table is here, on one `metadata`: the mirror's (sessions, events, rejects), the lifecycle's
(incarnations, gaps; leases and status are columns of `chat_sessions`, docs/lifecycle.md), the fan-out's
(permission requests), the commands' (`chat_commands`) and the revoked tokens (`bridge_revoked_tokens`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    Double,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    and_,
    false,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP

TIMESTAMPTZ = TIMESTAMP(timezone=True)

metadata = MetaData()

chat_sessions = Table(
    "chat_sessions",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("directory", Text, nullable=True),
    # Last durable seq stored for this session: the follower resumes with `after=cursor_seq`.
    Column("cursor_seq", BigInteger, nullable=False, server_default=text("0")),
    Column("status", Text, nullable=False, server_default=text("'idle'")),
    Column("status_reason", Text, nullable=True),
    # Moves on with every status write (0005): subscribers of any process keep the newest status only.
    Column("status_version", BigInteger, nullable=False, server_default=text("0")),
    Column("first_event_at", TIMESTAMPTZ, nullable=True),
    Column("last_event_at", TIMESTAMPTZ, nullable=True),
    Column("deleted", Boolean, nullable=False, server_default=false()),
    Column("deleted_at", TIMESTAMPTZ, nullable=True),
    # Set when history before the stored cursor is known to be missing (legacy gaps, docs/lifecycle.md).
    Column("incomplete", Boolean, nullable=False, server_default=false()),
    # The session's title as upstream last announced it (session.created / session.updated; 0010).
    Column("title", Text, nullable=True),
    # Lease with fencing token: every write batch must present the current lease_epoch.
    Column("lease_owner", Text, nullable=True),
    Column("lease_epoch", BigInteger, nullable=False, server_default=text("0")),
    Column("lease_expires_at", TIMESTAMPTZ, nullable=True),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    # The partition of its events (docs/lifecycle.md, "Partitions"): the UTC day the row was created, never
    # changed while the session has events (`partition-migrate` moves a session out of the legacy partition).
    Column("session_day", Date, nullable=False, server_default=text("((now() AT TIME ZONE 'UTC'))::date")),
    PrimaryKeyConstraint("upstream", "session_id", name="pk_chat_sessions"),
)

def session_key(upstream: str, session_id: str) -> Any:
    """The primary key of one `chat_sessions` row, as a WHERE clause (every statement on one session)."""
    return and_(chat_sessions.c.upstream == upstream, chat_sessions.c.session_id == session_id)


def session_day_of(upstream: str, session_id: str) -> Any:
    """The session's `session_day`, read from its `chat_sessions` row: one uncorrelated subquery, which
    PostgreSQL evaluates once and prunes `chat_session_events` to that one partition with."""
    return select(chat_sessions.c.session_day).where(session_key(upstream, session_id)).scalar_subquery()


chat_session_events = Table(
    "chat_session_events",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("schema_version", Integer, nullable=True),
    Column("event_time", TIMESTAMPTZ, nullable=True),
    Column("received_at", TIMESTAMPTZ, nullable=False),
    Column("stored_at", TIMESTAMPTZ, nullable=False, server_default=func.clock_timestamp()),
    Column("message_id", Text, nullable=True),
    Column("assistant_message_id", Text, nullable=True),
    Column("part_id", Text, nullable=True),
    Column("call_id", Text, nullable=True),
    Column("tool_name", Text, nullable=True),
    Column("error_type", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("finish", Text, nullable=True),
    Column("tokens_input", BigInteger, nullable=True),
    Column("tokens_output", BigInteger, nullable=True),
    Column("tokens_reasoning", BigInteger, nullable=True),
    Column("tokens_cache_read", BigInteger, nullable=True),
    Column("tokens_cache_write", BigInteger, nullable=True),
    Column("cost", Double, nullable=True),
    Column("delivery", Text, nullable=True),
    Column("agent", Text, nullable=True),
    Column("model_id", Text, nullable=True),
    Column("provider_id", Text, nullable=True),
    Column("payload", JSONB, nullable=False),
    Column("payload_lossy", Boolean, nullable=False, server_default=false()),
    # Tamper evidence (docs/audit.md, bridge.store.hash_chain): link of the per-session hash chain, set in write_batch.
    Column("chain_hash", Text, nullable=True),
    # The partition key (docs/lifecycle.md, "Partitions"): the session's `chat_sessions.session_day`, so a
    # session is whole in one partition. Both unique keys hold it; it is a function of the session.
    Column("session_day", Date, nullable=False),
    PrimaryKeyConstraint("upstream", "session_id", "seq", "session_day", name="pk_chat_session_events"),
    # The same event has the same id on every upstream stream (docs/upstream.md §2), and is stored only in
    # the session its aggregate names (bridge.upstream.admit): a dedupe key per session.
    UniqueConstraint("upstream", "session_id", "event_id", "session_day", name="uq_chat_session_events_event_id"),
    Index("ix_chat_session_events_session_time", "upstream", "session_id", "event_time"),
    Index(
        "ix_chat_session_events_tool_time",
        "tool_name",
        "event_time",
        postgresql_where=text("tool_name IS NOT NULL"),
    ),
    Index("ix_chat_session_events_event_time", "event_time"),
    Index("ix_chat_session_events_kind", "kind"),
    # The outcome of each tool call (audit_tool_calls' lateral lookup): migration 0006.
    Index(
        "ix_chat_session_events_call",
        "upstream",
        "session_id",
        "call_id",
        "seq",
        postgresql_where=text("call_id IS NOT NULL"),
    ),
    postgresql_partition_by="RANGE (session_day)",
)


def session_events(upstream: str, session_id: str) -> Any:
    """The rows of one session in `chat_session_events`, as a WHERE clause naming its partition too."""
    e = chat_session_events.c
    return and_(e.upstream == upstream, e.session_id == session_id,
                e.session_day == session_day_of(upstream, session_id))


chat_event_rejects = Table(
    "chat_event_rejects",
    metadata,
    Column("id", BigInteger, nullable=False, autoincrement=True),  # bigserial
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=True),
    Column("seq", BigInteger, nullable=True),
    Column("event_id", Text, nullable=True),
    Column("reason", Text, nullable=False),
    Column("detail", Text, nullable=True),
    # The frame text, or the exact JSON text of the envelope: nothing is lost.
    Column("raw", Text, nullable=False),
    Column("received_at", TIMESTAMPTZ, nullable=False),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("id", name="pk_chat_event_rejects"),
    Index("ix_chat_event_rejects_session", "upstream", "session_id"),
)


# --- the warm-session lifecycle (docs/lifecycle.md): leases and status live on chat_sessions -----------

# One row per bridge process start. The heartbeat renews `expires_at` (and every lease the incarnation
# holds); a clean shutdown sets `stopped_at`. Operators read it to see who is alive and owns what.
bridge_incarnations = Table(
    "bridge_incarnations",
    metadata,
    Column("incarnation_id", Text, nullable=False),
    Column("upstream", Text, nullable=False),
    Column("hostname", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("heartbeat_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("expires_at", TIMESTAMPTZ, nullable=False),
    Column("stopped_at", TIMESTAMPTZ, nullable=True),
    PrimaryKeyConstraint("incarnation_id", name="pk_bridge_incarnations"),
    Index("ix_bridge_incarnations_upstream_expires", "upstream", "expires_at"),
)

# Seq ranges of a session that the durable stream never delivered (legacy-driven turns burn seqs that
# not on the durable stream, docs/upstream.md §3.1, §5): the mirror is incomplete there.
chat_session_gaps = Table(
    "chat_session_gaps",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("from_seq", BigInteger, nullable=False),
    Column("to_seq", BigInteger, nullable=False),
    Column("detected_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("upstream", "session_id", "from_seq", name="pk_chat_session_gaps"),
)


# --- the WebSocket fan-out (docs/websocket.md) ----------------------------------------------------------

# Permission requests are live-only upstream (`permission.v2.*` on `/api/event` only, docs/upstream.md §4.4),
# so the bridge keeps them itself; a page opened later still sees a pending one. One row per request id;
# `reply` is NULL while the request is pending.
chat_permission_requests = Table(
    "chat_permission_requests",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("action", Text, nullable=True),
    Column("assistant_message_id", Text, nullable=True),
    Column("call_id", Text, nullable=True),
    # Which runtime asked (0008): `v2` (`permission.v2.asked`, answered on the v2 endpoint) or `legacy`
    # (`permission.asked`, answered on `/permission/{id}/reply`; docs/upstream.md §16, §17).
    Column("runtime", Text, nullable=False, server_default=text("'v2'")),
    # The asking envelope exactly as received (v2: resources, save, source …; legacy: the bus event).
    Column("asked", JSONB, nullable=True),
    Column("asked_at", TIMESTAMPTZ, nullable=True),
    # once | always | reject; unknown: answered while /api/event was down (found by the re-sync); NULL: pending
    # (questions: answered | rejected | unknown)
    Column("reply", Text, nullable=True),
    Column("replied", JSONB, nullable=True),
    Column("replied_at", TIMESTAMPTZ, nullable=True),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    # 0012: the table holds every pending request (docs/mirror.md, "Pending requests"): `permission` or a
    # `question` of the question tool (docs/upstream.md §18); a question's answers; the token subject of
    # the bridge command that answered (NULL: answered elsewhere, or not yet).
    Column("kind", Text, nullable=False, server_default=text("'permission'")),
    Column("answer", JSONB, nullable=True),
    Column("answered_by", Text, nullable=True),
    PrimaryKeyConstraint("upstream", "request_id", name="pk_chat_permission_requests"),
    Index(
        "ix_chat_permission_requests_pending",
        "upstream",
        "session_id",
        postgresql_where=text("reply IS NULL"),
    ),
    Index("ix_chat_permission_requests_pending_age", "asked_at", postgresql_where=text("reply IS NULL")),
)


# Session-level errors (`session.error`, live only upstream, docs/upstream.md §20), for the audit
# (docs/audit.md, "Session errors"; migration 0015): one row per error event, whichever replica saw it first.
chat_session_errors = Table(
    "chat_session_errors",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("error_type", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("payload", JSONB, nullable=False),  # the live envelope as received
    Column("received_at", TIMESTAMPTZ, nullable=False),
    PrimaryKeyConstraint("upstream", "event_id", name="pk_chat_session_errors"),
    Index("ix_chat_session_errors_session", "upstream", "session_id", "received_at"),
)


# --- commands (docs/commands.md) ------------------------------------------------------------------------

# One row per command sent through the bridge, written before the upstream is called (`state = 'pending'`)
# and completed after: a retry with the same `command_id` finds the row and returns its result, or re-sends
# a pending one with the same derived upstream id. `fingerprint` tells a retry (same) from a reuse of the id
# for something else (409). A `command_id` belongs to its sender and target: the key is (upstream, subject,
# target_session, command_id), so another caller's ids are invisible and never clash (docs/security.md).
chat_commands = Table(
    "chat_commands",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("command_id", Text, nullable=False),
    Column("command", Text, nullable=False),  # prompt | interrupt | model | agent | permission_reply | create_session
    Column("session_id", Text, nullable=True),  # for create_session: the derived id of the new session
    # The session named in the request's path; "" for create_session (part of the key, unlike session_id,
    # which for a new session is derived from the command and its time).
    Column("target_session", Text, nullable=False, server_default=text("''")),
    Column("subject", Text, nullable=False),  # the token's `sub` ("" when the token has none)
    Column("scope", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("body", JSONB, nullable=False),  # the command's canonical arguments
    Column("state", Text, nullable=False),  # pending | queued | sending | done | failed (docs/commands.md)
    Column("upstream_id", Text, nullable=True),  # derived upstream message (or session) id, fixed at insert
    Column("upstream_status", Integer, nullable=True),
    Column("admitted_seq", BigInteger, nullable=True),  # prompts: seq of the stored `prompt.admitted`
    Column("http_status", Integer, nullable=True),
    Column("result", JSONB, nullable=True),  # the answer given to the client, returned again on a retry
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("completed_at", TIMESTAMPTZ, nullable=True),
    Column("runtime", Text, nullable=True),  # prompts: legacy | v2, the runtime it was sent through
    Column("sent_at", TIMESTAMPTZ, nullable=True),  # prompts: when the upstream took it
    # legacy prompts: the send claim, by compare-and-set (bridge.commands.legacy_delivery, migration 0016)
    Column("send_token", Text, nullable=True),  # the delivery attempt holding the row
    Column("send_claimed_at", TIMESTAMPTZ, nullable=True),  # taken or renewed, by the database's clock
    PrimaryKeyConstraint("upstream", "subject", "target_session", "command_id", name="pk_chat_commands"),
    Index("ix_chat_commands_session", "upstream", "session_id", "created_at"),
    Index("ix_chat_commands_queued", "upstream", "session_id", "created_at",
          postgresql_where=text("state IN ('queued', 'sending')")),
)


# --- erased sessions (docs/lifecycle.md, "Erasure"; migration 0017) -------------------------------------------

# One row per erased session (the one asked for and each of its subagents' sessions, `root_session_id` the
# one asked for): when, who (`erased_by`: the token subject or the operator), why, and how many rows left
# each table (`rows`). A trigger on every table a claim or a live event writes a session's row into skips
# the rows of a tombstoned session (`bridge_skip_tombstoned`), so nothing mirrors it again. Never deleted.
chat_session_tombstones = Table(
    "chat_session_tombstones",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("root_session_id", Text, nullable=False),
    Column("erased_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("erased_by", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("rows", JSONB, nullable=False),
    Column("command_id", Text, nullable=True),
    PrimaryKeyConstraint("upstream", "session_id", name="pk_chat_session_tombstones"),
)


# --- revoked tokens (docs/security.md, "Tokens") ------------------------------------------------------------

# `opencode-bridge token --revoke JTI`: every process reloads the list every few seconds (bridge.revocation)
# and refuses a token whose `jti` is here, on HTTP and on the WebSocket. Rows are never deleted: a jti is
# random, the list stays small, and a revoked token must never come back.
bridge_revoked_tokens = Table(
    "bridge_revoked_tokens",
    metadata,
    Column("jti", Text, nullable=False),
    Column("revoked_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("reason", Text, nullable=False, server_default=text("''")),
    PrimaryKeyConstraint("jti", name="pk_bridge_revoked_tokens"),
)
