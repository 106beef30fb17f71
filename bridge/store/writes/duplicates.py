"""Rows of a batch that did not go in (bridge.store.writes.transaction): benign or conflicting duplicates, and the
rows `chat_event_rejects` keeps for them and for lossy payloads (docs/mirror.md, "Writing exactly once")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

import bridge.store.writes.rejects as q
from bridge.store.payload import same_json
from bridge.store.writes.rows import PreparedEvent

REASON_CONFLICTING_DUPLICATE = "conflicting_duplicate"
REASON_LOSSY_PAYLOAD = "lossy_payload"


@dataclass
class Outcome:
    inserted: list[PreparedEvent] = field(default_factory=list)
    duplicates: int = 0
    conflicts: list[tuple[PreparedEvent, list[dict[str, Any]]]] = field(default_factory=list)


async def classify_skipped(
    conn: AsyncConnection, upstream: str, session_id: str, skipped: list[tuple[Outcome, PreparedEvent]]
) -> None:
    """A skipped insert is a benign duplicate if the very same event is stored at its seq, else a
    conflicting duplicate (same seq with another id or payload, or its id stored at another seq)."""
    stmt = q.stored_events_matching(upstream, session_id, [p.seq for _, p in skipped], [p.event_id for _, p in skipped])
    stored = [
        {"session_id": r.session_id, "seq": int(r.seq), "event_id": r.event_id, "payload": r.payload}
        for r in await conn.execute(stmt)
    ]
    at_seq = {s["seq"]: s for s in stored if s["session_id"] == session_id}
    with_id = {s["event_id"]: s for s in stored}
    for out, p in skipped:
        here = at_seq.get(p.seq)
        if here is not None and here["event_id"] == p.event_id and same_json(here["payload"], p.payload):
            out.duplicates += 1
            continue
        clashes = [here] if here is not None else []
        elsewhere = with_id.get(p.event_id)
        if elsewhere is not None and elsewhere is not here:
            clashes.append(elsewhere)
        out.conflicts.append((p, clashes))


def reject_rows(upstream: str, session_id: str, received_at: datetime, out: Outcome) -> list[dict[str, Any]]:
    rows = [
        _reject_row(upstream, session_id, received_at, p, REASON_LOSSY_PAYLOAD,
                    "stored with unstorable characters replaced (payload_lossy); raw is the exact envelope")
        for p in out.inserted
        if p.lossy
    ]
    for p, clashes in out.conflicts:
        detail = {
            "incoming": {"seq": p.seq, "event_id": p.event_id},
            "stored": [
                {"session_id": s["session_id"], "seq": s["seq"], "event_id": s["event_id"],
                 "same_payload": same_json(s["payload"], p.payload)}
                for s in clashes
            ],
        }
        rows.append(_reject_row(upstream, session_id, received_at, p, REASON_CONFLICTING_DUPLICATE, json.dumps(detail)))
    return rows


def _reject_row(
    upstream: str, session_id: str, received_at: datetime, p: PreparedEvent, reason: str, detail: str
) -> dict[str, Any]:
    return {"upstream": upstream, "session_id": session_id, "seq": p.seq, "event_id": p.event_id,
            "reason": reason, "detail": detail, "raw": p.exact_json(), "received_at": received_at}
