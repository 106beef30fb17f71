"""Permission requests (docs/upstream.md §4.4): their state changes as one value, whatever told the bridge.

Upstream sends them only on `/api/event` (lossy), so a change comes from a live `permission.v2.*` event,
from the re-sync against `GET /api/session/{id}/permission` after a reconnect (a request pending upstream,
or one no longer pending that was answered while the bridge was away), or from the stored record (replay
to a new subscriber). `record` is what `chat_permission_requests` keeps: the envelope as received, or for a
re-sync the bridge's own record in the same shape, so every stored record reads back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.errors import BadFrame
from bridge.events.chat import ChatEvent
from bridge.events.envelope import parse_envelope
from bridge.events.kinds import Kind
from bridge.events.normalize import asked_fields, normalize

REPLY_UNKNOWN = "unknown"


@dataclass(frozen=True)
class PermissionUpdate:
    session_id: str
    request_id: str
    replied: bool  # False: asked (pending)
    data: dict[str, Any]  # the upstream's data (sent to clients as is)
    record: dict[str, Any]  # what is stored
    action: str | None = None
    assistant_message_id: str | None = None
    call_id: str | None = None
    reply: str | None = None
    runtime: str = "v2"  # which runtime asked: `v2` or `legacy` (answered on different endpoints, §16, §17)
    resources: list[Any] | None = None  # what it asks for (v2 `resources`, legacy `patterns`)


def permission_update(ev: ChatEvent) -> PermissionUpdate | None:
    """The update a live `permission.v2.asked`/`.replied` event carries; None for any other event, or one
    without a request id or a session."""
    if ev.kind not in (Kind.PERMISSION_ASKED, Kind.PERMISSION_REPLIED) or not ev.request_id or not ev.session_id:
        return None
    return permission_of(ev.session_id, ev)


def permission_of(session_id: str, ev: ChatEvent) -> PermissionUpdate:
    """The update of a permission event (`ev.request_id` set) of either runtime, for `session_id`."""
    assert ev.request_id is not None
    resources = ev.data.get("resources" if ev.runtime == "v2" else "patterns")
    return PermissionUpdate(session_id, ev.request_id, ev.kind == Kind.PERMISSION_REPLIED, ev.data,
                            ev.envelope.raw, ev.action, ev.assistant_message_id, ev.call_id, ev.reply,
                            runtime=ev.runtime, resources=resources if isinstance(resources, list) else None)


def pending_request(session_id: str, item: dict[str, Any]) -> PermissionUpdate | None:
    """One item of `GET /api/session/{id}/permission` (the data of its `permission.v2.asked`)."""
    f = asked_fields(item)
    rid = f["request_id"]
    if not isinstance(rid, str) or not rid:
        return None
    data = {**item, "sessionID": session_id}
    record = {"id": f"bridge_resync_asked_{rid}", "type": "permission.v2.asked", "data": data}
    resources = item.get("resources")
    return PermissionUpdate(session_id, rid, False, data, record, f["action"], f["assistant_message_id"],
                            f["call_id"], resources=resources if isinstance(resources, list) else None)


def resolved_while_away(session_id: str, request_id: str, note: str) -> PermissionUpdate:
    """A request pending here but no longer upstream: answered while the bridge did not listen; the
    answer itself is not known."""
    data = {"sessionID": session_id, "requestID": request_id, "reply": REPLY_UNKNOWN, "note": note}
    record = {"id": f"bridge_resync_replied_{request_id}", "type": "permission.v2.replied", "data": data}
    return PermissionUpdate(session_id, request_id, True, data, record, reply=REPLY_UNKNOWN)


def stored_permission(session_id: str, record: object) -> PermissionUpdate | None:
    """A stored record read back (None for one that is not a permission envelope)."""
    try:
        ev = normalize(parse_envelope(record))
    except BadFrame:
        return None
    if ev.kind not in (Kind.PERMISSION_ASKED, Kind.PERMISSION_REPLIED) or not ev.request_id:
        return None
    return permission_of(session_id, ev)
