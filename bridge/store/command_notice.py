"""`NOTIFY bridge_commands`: a prompt row changed state (`queued`, `sent`, `dropped`), sent inside the
transaction that changed it, so every process's WebSocket subscribers of the session get a `command`
frame (docs/websocket.md §2.2) whichever replica sent the prompt."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import TextClause, bindparam, text

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
    try:
        d = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(d, dict):
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


def command_message(notice: CommandNotice) -> dict[str, object]:
    """The WebSocket frame: `{"type":"command","session","command":"prompt","command_id","state"}`; the
    row itself is in `GET /v1/sessions/{id}/commands`."""
    return {"type": "command", "session": notice.session_id, "command": "prompt",
            "command_id": notice.command_id, "state": notice.state}
