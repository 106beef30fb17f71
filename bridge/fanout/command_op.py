"""The WebSocket `command` op (docs/websocket.md, docs/commands.md): the command run through the daemon's
command door, its result (or why not) as the one message to send back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bridge.auth import Claims
from bridge.command_service import Outcome
from bridge.fanout import protocol as p
from bridge.log import correlation_id


async def command_reply(commands: Callable[..., Awaitable[Outcome]] | None, claims: Claims,
                        expired: Callable[[], bool], op: p.CommandOp, log: Any) -> dict[str, Any]:
    """The reply to `op`: its result, or an error (not offered, token expired, failed); never raises, so the
    connection is kept, as for the other ops."""
    if commands is None:
        return p.error_message(p.ERR_BAD_MESSAGE, "commands are not offered here", op.ref)
    if expired():
        return p.error_message(p.ERR_TOKEN_EXPIRED, "token expired", op.ref)
    try:
        out = await commands(claims, op.command, op.body, op.session, op.request_id)
    except Exception as e:  # keep the connection, as for the other ops
        ref = correlation_id()
        log.error("ws_command_failed", command=op.command, correlation_id=ref, error=f"{type(e).__name__}: {e}"[:300])
        return p.error_message(p.ERR_INTERNAL, "command failed, retry with the same command_id "
                               f"(correlation id {ref})", op.ref, correlation_id=ref)
    return p.command_result_message(op.command, out.status, out.body, op.ref)
