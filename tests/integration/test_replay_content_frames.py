"""Replay frames equal live frames for the same event, content fields included (docs/websocket.md): over
every event of the captures `x14-subagent-todo-diff` and `x15-undo-delete-attach` (subagents, todos, patches,
attachments, synthetic text, undo, removal), and over the v2 content kinds a serve may send on its durable
stream, the frame a subscriber's replay gets (bridge.store.reads.replay, built by PostgreSQL where it can) is the
frame the live feed built from the event when it was ingested (bridge.fanout.protocol.event_message)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import ChatEvent, normalize
from bridge.events.envelope import parse_envelope
from bridge.fanout import protocol as p
from bridge.store.reads import FanoutStore
from bridge.store.writes.event_store import EventStore
from tests.support.chat_events import RECEIVED_AT
from tests.unit.test_session_content import X14, X15, mapped_log

V2_SID = "ses_dcc8dbc8effeTwaLrwelAKi9EV"
# v2 durable events with content fields (docs/upstream.md §20): shapes from the bundle's schemas.
V2_CONTENT: list[tuple[str, dict[str, Any]]] = [
    ("session.next.synthetic", {"messageID": "msg_u1", "text": "Called the Read tool with the following input"}),
    ("session.next.compaction.started", {"auto": True, "reason": "overflow"}),
    ("session.next.compaction.ended", {"auto": True, "text": "the summary"}),
    ("session.next.retried", {"attempt": 2, "error": {"message": "Rate limit exceeded"}}),
    ("session.next.shell.started", {"command": "ls -la"}),
    ("session.next.shell.ended", {"command": "ls -la", "output": "total 0"}),
    ("session.next.revert.staged", {"messageID": "msg_u1"}),
    ("session.next.revert.cleared", {}),
    ("session.next.revert.committed", {}),
    ("session.next.tool.success", {"callID": "c1", "assistantMessageID": "msg_a1", "content": [],
                                   "state": {"metadata": {"sessionId": "ses_child1"}}}),
    ("session.next.tool.called", {"callID": "c2", "assistantMessageID": "msg_a1", "tool": "task",
                                  "input": {"prompt": "hi"}, "state": {"metadata": {"sessionId": "ses_child2"}}}),
]


def v2_events() -> list[ChatEvent]:
    out = []
    for seq, (type_, data) in enumerate(V2_CONTENT, start=1):
        raw = {"id": f"evt_v2content{seq:04d}", "type": type_, "durable": {"aggregateID": V2_SID, "seq": seq,
                                                                            "version": 1},
               "data": {"sessionID": V2_SID, "timestamp": 1796004921000 + seq, **data}}
        out.append(normalize(parse_envelope(raw)))
    return out


async def assert_replay_is_live(engine: AsyncEngine, store: EventStore, sid: str, events: list[ChatEvent]) -> None:
    epoch, _ = await store.claim(sid, "owner-1")
    await store.write_batch(sid, epoch, events, RECEIVED_AT)
    live = {ev.seq: p.event_message(sid, int(ev.seq or 0), ev.envelope.raw, ev.kind) for ev in events}
    replayed = p.replay_frames(sid, await FanoutStore(engine, store.upstream).frames_after(sid, -1, 10_000))
    assert [seq for seq, _ in replayed] == sorted(live)
    for seq, frame in replayed:
        assert json.loads(frame) == live[seq], (sid, seq, live[seq]["kind"])


@pytest.mark.parametrize("name", [X14, X15])
async def test_replay_frames_of_the_captures_are_the_live_frames(
        store: EventStore, engine: AsyncEngine, name: str) -> None:
    sessions = mapped_log(name)
    assert sessions
    for sid, events in sessions.items():
        await assert_replay_is_live(engine, store, sid, events)


async def test_replay_frames_of_v2_content_kinds_are_the_live_frames(store: EventStore, engine: AsyncEngine) -> None:
    events = v2_events()
    assert all(ev.kind != "unknown" for ev in events)
    await assert_replay_is_live(engine, store, V2_SID, events)
