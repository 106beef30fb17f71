"""Which frames of one session may be stored (pure): a durable event of this session, or why not.

The durable stream's frames and the `/history` items pass here; a `Rejected` is kept in
`chat_event_rejects` with its reason (docs/mirror.md, "Bad input"), never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import BadFrame
from bridge.events import ChatEvent, Envelope, Kind, parse_envelope, parse_frame


@dataclass(frozen=True)
class Rejected:
    """An item that cannot be stored, and why (kept in `chat_event_rejects` by the session's ingest)."""

    reason: str
    raw: str
    seq: int | None
    detail: str


def json_text(item: object) -> str:
    """A decoded item as the text a reject keeps."""
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=repr)


def check(ev: ChatEvent, session_id: str, raw: Callable[[], str], log: FilteringBoundLogger) -> ChatEvent | Rejected:
    """A durable event of this session, or why not. `raw` is only needed for a reject: history items
    are not re-serialized on the happy path."""
    env = ev.envelope
    if env.seq is None:
        return Rejected("not_durable", raw(), None, f"type {env.type} without durable.seq")
    if env.aggregate_id is not None and env.aggregate_id != session_id:
        return Rejected("wrong_session", raw(), env.seq, f"aggregateID {env.aggregate_id}")
    if ev.kind is Kind.UNKNOWN:
        metrics.UNKNOWN_EVENTS.labels(stream="durable").inc()
        log.warning("unknown_event_type", type=env.type, seq=env.seq)
    return ev


def parse_item(item: object, session_id: str, normalize: Callable[[Envelope], ChatEvent],
               log: FilteringBoundLogger) -> ChatEvent | Rejected:
    """One `/history` item (already decoded JSON); nothing is written here."""
    try:
        env = parse_envelope(item)
    except BadFrame as e:
        return Rejected(e.reason, json_text(item), None, str(e))
    return check(normalize(env), session_id, lambda: json_text(item), log)


def parse_frame_item(data: str, session_id: str, normalize: Callable[[Envelope], ChatEvent],
                     log: FilteringBoundLogger) -> ChatEvent | Rejected:
    """One frame of the durable stream (its `data:` text), decoded once; nothing is written here. A reject
    keeps the frame's own text."""
    try:
        env = parse_frame(data)
    except BadFrame as e:
        return Rejected(e.reason, data, None, str(e))
    return check(normalize(env), session_id, lambda: data, log)
