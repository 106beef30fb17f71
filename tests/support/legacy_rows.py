"""Legacy captures as the ingest stores them (docs/legacy.md): persisted legacy events as sync-log items
with their seq, mapped with `normalize_legacy`; live-only ones (deltas, permissions) as bus events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bridge.events import ChatEvent, Envelope
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.syncframes import decode_json, parse_bus_event, parse_sync_item, parse_sync_log
from bridge.upstream.sse import SSEEvent, SSEParser

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
PERSISTED = ("message.updated", "message.part.updated", "session.updated")
# Every capture with a legacy message store (`GET /session/{id}/message`), and that store's file.
STORES = {
    "l-legacy-prompt": "06-legacy-messages.json",
    "l2-legacy-provider-retry": "07-legacy-messages.json",
    "x1-legacy-tool-turn": "04-legacy-messages.json",
    "x2-legacy-reasoning": "03-legacy-messages.json",
    "x5-legacy-permission": "06-legacy-messages.json",
    "x8-legacy-client-message-id": "04-legacy-messages.json",
}



def legacy_frame(data: str | bytes) -> Envelope:
    """The `data:` text of one legacy `/event` SSE event of the captures (the daemon reads /global/event)."""
    return parse_bus_event(decode_json(data))

def message_store(name: str) -> tuple[str, list[dict[str, Any]]]:
    exchange = json.loads((FIXTURES / name / STORES[name]).read_text())
    return exchange["request"]["path"].split("/")[2], exchange["response"]["body"]


def legacy_frames(name: str, session_id: str) -> list[Envelope]:
    parser = SSEParser()
    items = parser.feed((FIXTURES / name / "legacy.sse").read_bytes()) + parser.close()
    envs = [legacy_frame(i.data) for i in items if isinstance(i, SSEEvent)]
    return [e for e in envs if e.session_id == session_id]


def as_sync_item(env: Envelope, seq: int) -> Envelope:
    """A persisted legacy bus event as the sync log gives it (same id and data; the seq is the capture's
    order, as the log's own seqs are for the events it holds)."""
    return parse_sync_item({"id": env.id, "aggregate_id": env.session_id, "seq": seq, "type": f"{env.type}.1",
                            "data": env.data})


def legacy_session(name: str) -> tuple[str, list[ChatEvent]]:
    """(session id, its events in arrival order), mapped by one `LegacyTurnState` as the live reader
    would: the persisted ones as sync items (with a seq: store them), the live-only ones (deltas,
    permissions, statuses) as bus events (no seq: relay them)."""
    session_id, _ = message_store(name)
    state = LegacyTurnState()
    events: list[ChatEvent] = []
    seq = 0
    for env in legacy_frames(name, session_id):
        if env.type in PERSISTED:
            seq += 1
            env = as_sync_item(env, seq)
        events.append(normalize_legacy(env, state))
    return session_id, events


def x9_sync_log() -> tuple[str, list[ChatEvent]]:
    """x9: a legacy tool turn then a v2 text turn, the whole sync log of the session, mapped."""
    body = json.loads((FIXTURES / "x9-sync-history" / "04-sync-history-sid-0.json").read_text())
    envs = [e for e in parse_sync_log(body["response"]["body"]) if isinstance(e, Envelope)]
    state = LegacyTurnState()
    events = [normalize_legacy(e, state) for e in envs]
    return str(envs[0].aggregate_id), events
