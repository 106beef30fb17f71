"""The `erase` command (`DELETE /v1/sessions/{id}/mirror`, docs/lifecycle.md "Erasure"): the session and its
subagents' sessions leave the mirror with a tombstone each (bridge.store.lifecycle.erase); with
`upstream: true` the serve deletes the session too (`DELETE /session/{id}`, docs/upstream.md §20; a 404
there means it is gone already).

The mirror goes first: a retry after an upstream outage finds the command row `pending`, erases again (a
no-op, the first tombstone stays) and asks the serve again. The command's own `chat_commands` row stays: it
is the audit of the erasure, with the tombstone."""

from __future__ import annotations

from typing import Any

import structlog

from bridge import metrics
from bridge.command_service.rows import DoorRows
from bridge.commands.model import Command
from bridge.errors import SessionNotFound
from bridge.upstream.commands import UpstreamCommands

_log = structlog.get_logger("bridge.lifecycle")


async def run_erase(store: DoorRows, upstream: UpstreamCommands, cmd: Command, subject: str,
                    directory: str | None) -> tuple[int | None, dict[str, Any]]:
    """(upstream status or None, the answer's body)."""
    assert cmd.session_id is not None
    done = await store.erase(cmd.session_id, erased_by=subject or "(no subject)", reason=cmd.args["reason"],
                             command_id=cmd.command_id)
    metrics.SESSIONS_ERASED.labels(via="command").inc(len(done.sessions))
    _log.info("session_erased", session_id=cmd.session_id, sessions=len(done.sessions), rows=done.total,
              subject=subject, already=done.already, command_id=cmd.command_id)
    body: dict[str, Any] = {"command_id": cmd.command_id, **done.summary(), "upstream_deleted": None}
    status = None
    if cmd.args.get("upstream"):
        try:
            status, _ = await upstream.session_op(cmd.session_id, directory or "", "DELETE", "", None)
            body["upstream_deleted"] = True
        except SessionNotFound:
            body["upstream_deleted"] = False  # the serve has no such session (any more)
    return status, body
