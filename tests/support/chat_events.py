"""Builders of ChatEvent/Envelope values as the (pending) `bridge.events` mapping would produce them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bridge.events import ChatEvent, Envelope

SESSION = "ses_0001integration"
BASE_MS = 1_796_004_921_966


def event_id(seq: int, session_id: str = SESSION) -> str:
    return f"evt_{session_id}_{seq:08d}"


def envelope(
    seq: int | None,
    *,
    session_id: str = SESSION,
    id_: str | None = None,
    type_: str = "session.next.text.ended",
    data: dict[str, Any] | None = None,
) -> Envelope:
    body: dict[str, Any] = {"timestamp": BASE_MS + (seq or 0), "sessionID": session_id, "text": f"t{seq}"}
    body.update(data or {})
    eid = id_ if id_ is not None else event_id(seq or 0, session_id)
    raw: dict[str, Any] = {"id": eid, "type": type_, "data": body}
    if seq is not None:
        raw["durable"] = {"aggregateID": session_id, "seq": seq, "version": 1}
    return Envelope(
        id=eid,
        type=type_,
        seq=seq,
        version=1 if seq is not None else None,
        aggregate_id=session_id if seq is not None else None,
        session_id=session_id,
        data=body,
        raw=raw,
    )


def chat_event(
    seq: int | None,
    *,
    session_id: str = SESSION,
    id_: str | None = None,
    type_: str = "session.next.text.ended",
    data: dict[str, Any] | None = None,
    kind: str = "text",
    **fields: Any,
) -> ChatEvent:
    env = envelope(seq, session_id=session_id, id_=id_, type_=type_, data=data)
    return ChatEvent(envelope=env, kind=kind, timestamp_ms=env.data["timestamp"], **fields)


def batch(*seqs: int, session_id: str = SESSION) -> list[ChatEvent]:
    return [chat_event(s, session_id=session_id) for s in seqs]


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


RECEIVED_AT = datetime(2026, 11, 30, 2, 15, 22, tzinfo=UTC)
