"""A stored row of either runtime read back as a `ChatEvent` (pure; docs/legacy.md, docs/audit.md).

Every consumer of stored rows (the transcript, the WebSocket's replay and live frames) goes through
`stored_event(payload, kind)`, so none of them needs to know which runtime wrote a row:

- a v2 payload (the durable envelope `{id, type, durable, data}`) is normalized as it was at write time;
- a legacy payload (the sync-log item `{id, aggregate_id, seq, type: "<name>.<version>", data}`,
  docs/legacy.md "One event, one identity, one payload") gets the **stored** kind: whether an update was a
  milestone or a re-send depended on what came before it (`bridge.events.legacy.LegacyTurnState`), which one row
  does not show. The fields are those the milestone carries, read from the payload; a re-send
  (`legacy:message-updated`, `legacy:part-updated`) carries only its ids, so it never repeats a text,
  an output, an error or tokens.

`stored_permission` reads a stored permission request of either runtime the same way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bridge.errors import BadFrame
from bridge.events.chat import ChatEvent
from bridge.events.envelope import Envelope, parse_envelope
from bridge.events.gen2 import GEN2_KINDS, normalize_any
from bridge.events.kinds import PERMISSION_KINDS, Kind
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_shapes import legacy_part
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.normalize import normalize_stored
from bridge.events.permission import PermissionUpdate, permission_of
from bridge.events.permission import stored_permission as stored_v2_permission
from bridge.events.syncframes import parse_bus_event, parse_sync_item

_RESENDS = frozenset({Kind.LEGACY_MESSAGE_UPDATED, Kind.LEGACY_PART_UPDATED})
# A re-send keeps where it belongs (ids, tool name, agent, model), never what it says.
_CLEARED = ("text", "error_type", "error_message", "finish", "cost", "tokens_input", "tokens_output",
            "tokens_reasoning", "tokens_cache_read", "tokens_cache_write")


def is_legacy_payload(payload: object) -> bool:
    """A stored sync-log item (a legacy event), as opposed to a durable envelope (v2)."""
    return isinstance(payload, dict) and "aggregate_id" in payload and "durable" not in payload


def stored_event(payload: object, kind: str | None = None) -> ChatEvent:
    """The event of a stored row (`payload`, and its `kind` column when known). Never raises on data."""
    if not is_legacy_payload(payload):
        if isinstance(payload, dict) and payload.get("type") in GEN2_KINDS:  # OpenCode 2.x (bridge.events.gen2)
            try:
                return normalize_any(parse_envelope(payload))
            except BadFrame:
                pass
        return normalize_stored(payload)
    try:
        env = parse_sync_item(payload)
    except BadFrame:
        return normalize_stored(payload)  # an odd row (hand-edited): `unknown`
    return legacy_row_event(env, kind)


def legacy_row_event(env: Envelope, kind: str | None) -> ChatEvent:
    """A legacy event mapped on its own, given the kind it was stored with (None: as if first seen)."""
    state = LegacyTurnState()
    message_id = legacy_part(env).get("messageID")
    if kind in (Kind.PROMPT_ADMITTED, Kind.PROMPT_SYNTHETIC) and isinstance(message_id, str):
        state.user_messages.add(message_id)  # only the stored kind knows the part is the prompt
    ev = normalize_legacy(env, state)
    if kind is None or ev.kind == kind:
        return ev
    try:
        stored = Kind(kind)
    except ValueError:
        stored = Kind.UNKNOWN
    if stored in _RESENDS:
        cleared: dict[str, Any] = dict.fromkeys(_CLEARED)
        return replace(ev, kind=stored, **cleared)
    return replace(ev, kind=stored)


def stored_permission(session_id: str, record: object) -> PermissionUpdate | None:
    """A `chat_permission_requests` record read back, of either runtime: the v2 envelope, or the legacy
    bus event `{id, type: "permission.asked" | "permission.replied", properties}` (None for anything else)."""
    if not (isinstance(record, dict) and "properties" in record and "data" not in record):
        return stored_v2_permission(session_id, record)
    try:
        ev = normalize_legacy(parse_bus_event(record), LegacyTurnState())
    except BadFrame:
        return None
    if ev.kind not in PERMISSION_KINDS or not ev.request_id:
        return None
    return permission_of(session_id, ev)


__all__ = ["is_legacy_payload", "legacy_row_event", "stored_event", "stored_permission"]
