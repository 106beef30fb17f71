"""`ChatEvent` → a row of `chat_session_events` (pure, no I/O).

Normalized columns are derived data: the payload keeps the truth. A derived value PostgreSQL cannot hold
(an out-of-range integer or timestamp) becomes NULL instead of failing the whole batch; characters it cannot
hold are replaced (see `bridge.store.payload`) and the row is flagged `payload_lossy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bridge.events import ChatEvent
from bridge.store.payload import exact_json_text, storable_json_text, storable_text

BIGINT_MAX = 2**63 - 1
BIGINT_MIN = -(2**63)

_TEXT_FIELDS = (
    "message_id",
    "assistant_message_id",
    "part_id",
    "call_id",
    "tool_name",
    "error_type",
    "error_message",
    "finish",
    "delivery",
    "agent",
    "model_id",
    "provider_id",
)
_BIGINT_FIELDS = (
    "tokens_input",
    "tokens_output",
    "tokens_reasoning",
    "tokens_cache_read",
    "tokens_cache_write",
)


@dataclass(frozen=True)
class PreparedEvent:
    event: ChatEvent
    seq: int
    event_id: str  # as stored (storable)
    row: dict[str, Any]  # column values for chat_session_events
    lossy: bool
    payload_text: str = ""  # the JSON text of row["payload"], sent as is (cast to jsonb by PostgreSQL)

    @property
    def payload(self) -> Any:
        return self.row["payload"]

    @property
    def event_time(self) -> datetime | None:
        value: datetime | None = self.row["event_time"]
        return value

    def exact_json(self) -> str:
        """The envelope exactly as received, as JSON text (for chat_event_rejects.raw)."""
        return exact_json_text(self.event.envelope.raw)


def prepare_event(upstream: str, session_id: str, event: ChatEvent, received_at: datetime) -> PreparedEvent:
    """Raises ValueError for an event the writer must never be given (no durable seq): a caller bug."""
    seq = event.seq
    if seq is None or isinstance(seq, bool) or not 0 <= seq <= BIGINT_MAX:
        raise ValueError(f"event {event.event_id!r} has no usable durable seq: {seq!r}")
    payload = storable_json_text(event.envelope.raw)
    lossy = payload.lossy
    row: dict[str, Any] = {
        "upstream": upstream,
        "session_id": session_id,
        "seq": seq,
        "schema_version": _int32_or_none(event.envelope.version),
        "event_time": _event_time(event.timestamp_ms),
        "received_at": received_at,
        "cost": event.cost,
        "payload": payload.value,
    }
    for column, value in (("event_id", event.event_id), ("type", event.type), ("kind", event.kind)):
        cleaned = storable_text(value)
        row[column] = cleaned.value
        lossy = lossy or cleaned.lossy
    for column in _TEXT_FIELDS:
        value = getattr(event, column)
        if value is not None:
            cleaned = storable_text(value)
            value = cleaned.value
            lossy = lossy or cleaned.lossy
        row[column] = value
    for column in _BIGINT_FIELDS:
        row[column] = _bigint_or_none(getattr(event, column))
    row["payload_lossy"] = lossy
    return PreparedEvent(event=event, seq=seq, event_id=row["event_id"], row=row, lossy=lossy,
                         payload_text=payload.text)


def _event_time(timestamp_ms: int | None) -> datetime | None:
    if timestamp_ms is None:
        return None
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _bigint_or_none(value: int | None) -> int | None:
    if value is None or not BIGINT_MIN <= value <= BIGINT_MAX:
        return None
    return value


def _int32_or_none(value: int | None) -> int | None:
    if value is None or not -(2**31) <= value < 2**31:
        return None
    return value
