"""`ChatEvent` → a row of `chat_session_events` (pure, no I/O).

Normalized columns are derived data: the payload keeps the truth. A derived value PostgreSQL cannot hold
(an out-of-range integer or timestamp) becomes NULL instead of failing the whole batch; characters it cannot
hold are replaced (see `bridge.store.payload`) and the row is flagged `payload_lossy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from bridge.events import ChatEvent
from bridge.events.fields import BIGINT_MAX, BIGINT_MIN
from bridge.perf.frozen import build
from bridge.store.payload import all_storable, exact_json_text, storable_json_text, storable_text

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


# Column order of `PreparedEvent.values` (bridge.store.writes.transaction sends one array per column, payload apart).
COLUMNS = ("session_id", "seq", "event_id", "type", "kind", "schema_version", "event_time", "received_at", "cost",
           *_TEXT_FIELDS, *_BIGINT_FIELDS, "payload_lossy")

_texts = attrgetter("event_id", "type", "kind", *_TEXT_FIELDS)
_bigints = attrgetter(*_BIGINT_FIELDS)
_NO_BIGINTS = (None,) * len(_BIGINT_FIELDS)


@dataclass(frozen=True)
class PreparedEvent:
    event: ChatEvent
    seq: int
    event_id: str  # as stored (storable)
    values: tuple[Any, ...]  # column values for chat_session_events, in COLUMNS order
    lossy: bool
    payload: Any  # the JSON value stored (storable)
    payload_text: str  # its JSON text, sent as is (cast to jsonb by PostgreSQL)
    upstream: str
    canonical: bool = False  # payload_text is PostgreSQL's jsonb text of it: hashable before the INSERT

    @property
    def row(self) -> dict[str, Any]:
        """Column values by name, `payload` as a JSON value."""
        return {"upstream": self.upstream, **dict(zip(COLUMNS, self.values, strict=True)), "payload": self.payload}

    @property
    def event_time(self) -> datetime | None:
        value: datetime | None = self.values[6]
        return value

    def exact_json(self) -> str:
        """The envelope exactly as received, as JSON text (for chat_event_rejects.raw)."""
        return exact_json_text(self.event.envelope.raw)


def prepare_event(upstream: str, session_id: str, event: ChatEvent, received_at: datetime) -> PreparedEvent:
    """Raises ValueError for an event the writer must never be given (no durable seq): a caller bug.

    Per event only what cannot be done per batch: one JSON encoding of the envelope (which also proves
    it storable), one check of all its text columns together."""
    seq = event.seq
    if seq is None or isinstance(seq, bool) or not 0 <= seq <= BIGINT_MAX:
        raise ValueError(f"event {event.event_id!r} has no usable durable seq: {seq!r}")
    payload = storable_json_text(event.envelope.raw)
    texts: tuple[str | None, ...] = _texts(event)
    lossy = payload.lossy
    if not all_storable(texts):
        cleaned = [None if t is None else storable_text(t) for t in texts]
        texts = tuple(None if c is None else c.value for c in cleaned)
        lossy = lossy or any(c is not None and c.lossy for c in cleaned)
    bigints: tuple[int | None, ...] = _bigints(event)
    for b in () if bigints == _NO_BIGINTS else bigints:
        if b is not None and not BIGINT_MIN <= b <= BIGINT_MAX:
            bigints = tuple(_bigint_or_none(b) for b in bigints)
            break
    version = event.envelope.version
    if version is not None and not -(2**31) <= version < 2**31:
        version = None
    timestamp_ms = event.timestamp_ms
    values = (session_id, seq, texts[0], texts[1], texts[2], version,
              None if timestamp_ms is None else _event_time(timestamp_ms), received_at, event.cost,
              *texts[3:], *bigints, lossy)
    # PreparedEvent(event, seq, …), without its __init__ (bridge.perf.frozen)
    return build(PreparedEvent, {"event": event, "seq": seq, "event_id": str(texts[0]), "values": values,
                                 "lossy": lossy, "payload": payload.value, "payload_text": payload.text,
                                 "upstream": upstream, "canonical": payload.canonical})


def _event_time(timestamp_ms: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _bigint_or_none(value: int | None) -> int | None:
    if value is None or not BIGINT_MIN <= value <= BIGINT_MAX:
        return None
    return value
