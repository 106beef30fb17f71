"""Replay frames built by PostgreSQL from the normalized columns (bridge.store.replay) are the frames
`bridge.fanout.protocol.event_message` builds from the stored envelope: for every captured durable event
of every scenario, and for the odd shapes a stored envelope may have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import normalize, parse_frame
from bridge.fanout import protocol as p
from bridge.store.events_store import EventStore
from bridge.store.fanout import FanoutStore

from .chat_events import RECEIVED_AT, chat_event

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
SCENARIOS = sorted(d.name for d in CAPTURES.iterdir() if (d / "durable.sse").is_file())


async def assert_frames_equal(engine: AsyncEngine, store: EventStore, sid: str, expected: int) -> None:
    fan = FanoutStore(engine, store.upstream)
    envelopes = await fan.events_after(sid, 0, 10_000)
    frames = await fan.event_frames_after(sid, 0, 10_000)
    assert len(frames) == len(envelopes) == expected
    for (seq, envelope), (fseq, frame) in zip(envelopes, frames, strict=True):
        assert fseq == seq
        assert json.loads(frame) == p.event_message(sid, seq, envelope), (sid, seq)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_every_captured_event_replays_as_the_python_frame(
    store: EventStore, engine: AsyncEngine, scenario: str
) -> None:
    lines = (CAPTURES / scenario / "durable.sse").read_text().splitlines()
    events = [normalize(parse_frame(line[6:])) for line in lines if line.startswith("data: ")]
    events = [e for e in events if e.seq is not None]
    if not events:
        pytest.skip("no durable events captured")
    sid = events[0].envelope.aggregate_id or events[0].envelope.session_id
    assert sid is not None
    epoch, _ = await store.claim(sid, "owner-1")
    mine = [e for e in events if (e.envelope.aggregate_id or sid) == sid]
    await store.write_batch(sid, epoch, mine, RECEIVED_AT)
    await assert_frames_equal(engine, store, sid, len({e.seq for e in mine}))


ODD: list[dict[str, Any]] = [
    {"type_": "session.next.text.ended", "data": {"text": 5}},  # a text that is no string: not in fields
    {"type_": "session.next.text.ended", "data": {"text": "t", "timestamp": 1.5}},  # float timestamp
    {"type_": "session.next.prompted", "data": {"prompt": {"text": "hi", "files": []}, "text": "hi"}},
    {"type_": "session.next.prompted", "data": {"prompt": "not an object", "delivery": "steer"}},
    {"type_": "session.next.text.ended", "data": {"text": "nul \u0000 here"}},  # stored lossy
    {"type_": "session.next.step.ended", "data": {"finish": "stop", "cost": 0.0123,
                                                   "tokens": {"input": 1, "output": 2, "cache": {"read": 3}}}},
    {"type_": "session.next.tool.failed", "data": {"callID": "c1", "error": {"type": "boom"}}},
    {"type_": "something.new", "data": {"whatever": [1, {"b": 2, "a": 1}]}},
]


async def test_odd_stored_envelopes_replay_as_the_python_frame(store: EventStore, engine: AsyncEngine) -> None:
    sid = "ses_odd_shapes"
    epoch, _ = await store.claim(sid, "owner-1")
    events = [chat_event(i + 1, session_id=sid, **kw) for i, kw in enumerate(ODD)]
    events = [normalize(e.envelope) for e in events]
    await store.write_batch(sid, epoch, events, RECEIVED_AT)
    await assert_frames_equal(engine, store, sid, len(ODD))
