"""`chat_commands`: one row per command sent through the bridge (docs/commands.md), on the shared metadata.

Written before the upstream is called (`state = 'pending'`) and completed after: a retry with the same
`command_id` finds the row and returns its result, or re-sends a pending one with the same derived
upstream id. `fingerprint` tells a retry (same) from a reuse of the id for something else (409).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, PrimaryKeyConstraint, Table, Text, func
from sqlalchemy.dialects.postgresql import JSONB

from bridge.store.schema import TIMESTAMPTZ, metadata

chat_commands = Table(
    "chat_commands",
    metadata,
    Column("upstream", Text, nullable=False),
    Column("command_id", Text, nullable=False),
    Column("command", Text, nullable=False),  # prompt | interrupt | model | agent | permission_reply | create_session
    Column("session_id", Text, nullable=True),  # for create_session: the derived id of the new session
    Column("subject", Text, nullable=False),  # the token's `sub` ("" when the token has none)
    Column("scope", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("body", JSONB, nullable=False),  # the command's canonical arguments
    Column("state", Text, nullable=False),  # pending | done | failed
    Column("upstream_id", Text, nullable=True),  # derived upstream message (or session) id, fixed at insert
    Column("upstream_status", Integer, nullable=True),
    Column("admitted_seq", BigInteger, nullable=True),  # prompts: seq of the stored `prompt.admitted`
    Column("http_status", Integer, nullable=True),
    Column("result", JSONB, nullable=True),  # the answer given to the client, returned again on a retry
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=func.now()),
    Column("completed_at", TIMESTAMPTZ, nullable=True),
    PrimaryKeyConstraint("upstream", "command_id", name="pk_chat_commands"),
    Index("ix_chat_commands_session", "upstream", "session_id", "created_at"),
)

__all__ = ["chat_commands", "metadata"]
