"""Live session state the upstream never persists, as WebSocket frames (docs/websocket.md "Session state";
docs/upstream.md §20): the todo list (`todo.updated`), the files-changed summary (`session.diff`) and a
session-level error (`session.error`). Pure: one live event → one frame or None.

They are state messages (never dropped, no seq): the latest one is the current state; after a reconnect a
page reads `GET /v1/sessions/{id}/todo|diff`, which ask the serve again.
"""

from __future__ import annotations

from typing import Any

from bridge.events import ChatEvent, Kind
from bridge.events.content import diff_items, todo_items


def live_state_message(ev: ChatEvent) -> dict[str, Any] | None:
    sid = ev.session_id
    if sid is None:
        return None
    if ev.kind == Kind.TODO_UPDATED:
        return {"type": "todo", "session": sid, "todos": todo_items(ev.data.get("todos"))}
    if ev.kind == Kind.LEGACY_SESSION_DIFF:
        return {"type": "diff", "session": sid, "diff": diff_items(ev.data.get("diff"))}
    if ev.kind == Kind.LEGACY_SESSION_ERROR:
        return {"type": "session_error", "session": sid, "error_type": ev.error_type,
                "error_message": ev.error_message}
    return None
