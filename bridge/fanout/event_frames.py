"""Stored rows as `event` frames of the `/v1/ws` protocol (docs/websocket.md), pure: the one path from rows
to frames for the live feed and a subscription's replay alike, and the reference frame of an event too large
for a client's queue. The rest of the protocol (client ops, the other server messages) is protocol.py,
which re-exports these."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from bridge.events import ChatEvent, Kind, to_json
from bridge.events.content import content_fields
from bridge.events.stored import stored_event


def dumps(msg: dict[str, Any]) -> str:
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":"))


_NOT_FIELDS = ("kind", "seq", "event_id", "type", "session_id")

# A stored row as the feed and the replay read it: (seq, payload, kind column).
StoredRow = tuple[int, dict[str, Any], str | None]


def event_message(session_id: str, seq: int, envelope: dict[str, Any], kind: str | None = None) -> dict[str, Any]:
    """A stored durable event of either runtime (`kind`: the row's stored kind, which a legacy row needs).
    `fields` is the normalized view, the same for both runtimes; `data` the upstream `data` untouched but
    for a text `fields.text` already carries."""
    ev = stored_event(envelope, kind)  # stored rows are valid envelopes; an odd one maps to `unknown`
    fields = {k: v for k, v in to_json(ev).items() if k not in _NOT_FIELDS}
    fields.update(_tool_fields(ev))
    fields.update(content_fields(ev))  # attachments, patches, undo, todos … (docs/websocket.md)
    return {"type": "event", "session": session_id, "seq": seq, "event_id": ev.event_id, "event_type": ev.type,
            "kind": ev.kind, "fields": fields, "data": ev.data_without_text(fields.get("text"))}


def _tool_fields(ev: ChatEvent) -> dict[str, Any]:
    """A tool call's input and output text, whichever runtime's payload holds them (docs/websocket.md)."""
    if ev.kind not in (Kind.TOOL_START, Kind.TOOL_SUCCESS, Kind.TOOL_FAIL):
        return {}
    out: dict[str, Any] = {}
    if ev.tool_input is not None:
        out["input"] = ev.tool_input
    if ev.kind == Kind.TOOL_SUCCESS and ev.tool_output_text is not None:
        out["output_text"] = ev.tool_output_text
    span = ev.tool_span_ms
    if span is not None and span[0] is not None and span[1] is not None and ev.kind != Kind.TOOL_START:
        out["duration_ms"] = span[1] - span[0]
    return out


def event_frames(session_id: str, rows: Iterable[StoredRow]) -> list[tuple[int, str]]:
    """Stored rows `(seq, envelope, kind)` → `(seq, event frame text)`: the one path from rows to frames, for
    the live feed and for a subscription's replay alike."""
    return [(seq, dumps(event_message(session_id, seq, envelope, kind))) for seq, envelope, kind in rows]


def replay_frames(session_id: str, rows: Iterable[tuple[int, str | None, Any, str | None]]) -> list[tuple[int, str]]:
    """Rows of `FanoutStore.frames_after` → `(seq, event frame text)`: a frame PostgreSQL built is sent as is,
    a legacy row is framed here (`event_message`), so both paths give the same frames as `event_frames`."""
    return [(seq, frame if frame is not None else dumps(event_message(session_id, seq, payload, kind)))
            for seq, frame, payload, kind in rows]


def truncated_event(frame: str) -> str:
    """An `event` frame too large for a client's queue, as a reference: the same envelope fields, `fields`
    without its long texts, `data` empty and `"truncated": {"bytes": N}`; the client fetches the whole
    event from `GET /v1/sessions/{session}/events?after={seq-1}&limit=1` (docs/websocket.md)."""
    msg = json.loads(frame)
    fields = msg.get("fields") if isinstance(msg.get("fields"), dict) else {}
    msg["fields"] = {k: v for k, v in fields.items() if not (isinstance(v, str) and len(v) > 1000)}
    msg["data"] = {}
    msg["truncated"] = {"bytes": len(frame.encode())}
    return dumps(msg)
