"""A permission reply sent to the runtime where the request is pending upstream: the v2 per-session list,
else the legacy `GET /permission` (each lists only its own, docs/upstream.md §4.4, §16; docs/commands.md)."""

from __future__ import annotations

from bridge.errors import SessionNotFound
from bridge.upstream.commands import UpstreamCommands


async def reply_where_pending(upstream: UpstreamCommands, sid: str, directory: str, request_id: str,
                              reply: str) -> tuple[str, int] | None:
    """(runtime, upstream status) of the reply sent; None when the request is pending on neither runtime
    (answered meanwhile: `PermissionNotFoundError` is not an error here)."""
    try:
        if any(p.get("id") == request_id for p in await upstream.v2_permissions(sid, directory)):
            return "v2", await upstream.reply_v2(sid, directory, request_id, reply)
        legacy = await upstream.legacy_permissions(directory)
        if any(p.get("id") == request_id and p.get("sessionID") == sid for p in legacy):
            return "legacy", await upstream.reply_legacy(directory, request_id, reply)
    except SessionNotFound:
        pass
    return None
