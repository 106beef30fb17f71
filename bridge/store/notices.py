"""The NOTIFY channels of the store, their payloads and statements, each sent inside the transaction that
made the change, so PostgreSQL delivers it only when (and if) that transaction commits, in commit order, to
every listening connection of every bridge process (docs/websocket.md):

- `bridge_events`: a batch committed (the write transaction, bridge.store.writes.transaction); payload
  `<upstream>|<session>|<max seq of the batch>`;
- `bridge_status`: a session's status changed (bridge.store.chat_sessions);
- `bridge_commands`: a prompt row changed state (`queued`, `sent`, `dropped`, bridge.store.commands_pending),
  so every process's subscribers of the session get a `command` frame (docs/websocket.md §2.2) whichever
  replica sent the prompt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import TextClause, bindparam, text

NOTIFY_CHANNEL = "bridge_events"
# Status writes (bridge.store.chat_sessions: LeaseStore.set_status, mark_deleted) notify here, in the
# writing transaction: every process pushes the status to its own subscribers (docs/websocket.md).
STATUS_CHANNEL = "bridge_status"
_REASON_MAX = 1000  # a NOTIFY payload must stay under 8000 bytes



@dataclass(frozen=True)
class CommitNotice:
    upstream: str
    session_id: str
    max_seq: int


def notice_payload(upstream: str, session_id: str, max_seq: int) -> str:
    return f"{upstream}|{session_id}|{max_seq}"


def parse_notice(payload: str) -> CommitNotice | None:
    """The inverse of `notice_payload`; None for a payload that is not ours. The upstream name may
    itself hold `|` (it is configurable), session ids and seqs do not."""
    parts = payload.rsplit("|", 2)
    if len(parts) != 3 or not parts[1] or not parts[2].isdigit():
        return None
    return CommitNotice(parts[0], parts[1], int(parts[2]))


@dataclass(frozen=True)
class StatusNotice:
    upstream: str
    session_id: str
    status: str
    reason: str | None
    version: int


def _json_object(payload: str) -> dict[str, Any] | None:
    try:
        d = json.loads(payload)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def status_payload(upstream: str, session_id: str, status: str, reason: str | None, version: int) -> str:
    if reason is not None and len(reason) > _REASON_MAX:
        reason = reason[: _REASON_MAX - 1] + "…"
    return json.dumps({"upstream": upstream, "session": session_id, "status": status, "reason": reason,
                       "version": version}, separators=(",", ":"), ensure_ascii=False)


def parse_status_notice(payload: str) -> StatusNotice | None:
    """The inverse of `status_payload`; None for anything else (never raises)."""
    d = _json_object(payload)
    if d is None:
        return None
    upstream, sid, status, reason, version = (d.get(k) for k in ("upstream", "session", "status", "reason",
                                                                  "version"))
    if not (isinstance(upstream, str) and isinstance(sid, str) and sid and isinstance(status, str) and status):
        return None
    if reason is not None and not isinstance(reason, str):
        return None
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        return None
    return StatusNotice(upstream, sid, status, reason, version)


# --- statements --------------------------------------------------------------------------------------


def notify_committed(upstream: str, session_id: str, max_seq: int) -> TextClause:
    return text("SELECT pg_notify(:channel, :payload)").bindparams(
        bindparam("channel", NOTIFY_CHANNEL), bindparam("payload", notice_payload(upstream, session_id, max_seq))
    )


def notify_status(upstream: str, session_id: str, status: str, reason: str | None, version: int) -> TextClause:
    """Run inside the transaction that wrote the status: delivered only if (and when) it commits."""
    return text("SELECT pg_notify(:channel, :payload)").bindparams(
        bindparam("channel", STATUS_CHANNEL),
        bindparam("payload", status_payload(upstream, session_id, status, reason, version)),
    )


COMMAND_CHANNEL = "bridge_commands"


@dataclass(frozen=True)
class CommandNotice:
    upstream: str
    session_id: str
    command_id: str
    state: str


def command_payload(upstream: str, session_id: str, command_id: str, state: str) -> str:
    return json.dumps({"upstream": upstream, "session": session_id, "command_id": command_id, "state": state},
                      separators=(",", ":"), ensure_ascii=False)


def parse_command_notice(payload: str) -> CommandNotice | None:
    """The inverse of `command_payload`; None for anything else (never raises)."""
    d = _json_object(payload)
    if d is None:
        return None
    got = [d.get(k) for k in ("upstream", "session", "command_id", "state")]
    if not all(isinstance(v, str) and v for v in got):
        return None
    upstream, sid, cid, state = (str(v) for v in got)
    return CommandNotice(upstream, sid, cid, state)


def notify_command(upstream: str, session_id: str, command_id: str, state: str) -> TextClause:
    return text("SELECT pg_notify(:channel, :payload)").bindparams(
        bindparam("channel", COMMAND_CHANNEL),
        bindparam("payload", command_payload(upstream, session_id, command_id, state)))
