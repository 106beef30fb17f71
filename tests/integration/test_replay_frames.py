"""Replay frames built by PostgreSQL from the normalized columns (bridge.store.reads.replay) are the frames
`bridge.fanout.protocol.event_frames` builds from the stored rows: for every captured durable event of
every scenario, every captured legacy session, and the odd shapes a stored envelope may have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import normalize, parse_frame
from bridge.fanout import protocol as p
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, chat_event
from tests.support.legacy_rows import STORES, legacy_session

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
# Scenarios whose durable stream carried something (l2's legacy-only turn left it empty): no skips.
SCENARIOS = sorted(d.name for d in CAPTURES.iterdir()
                   if (d / "durable.sse").is_file() and "data: " in (d / "durable.sse").read_text())


async def assert_frames_equal(engine: AsyncEngine, store: EventStore, sid: str, expected: int) -> None:
    fan = FanoutStore(engine, store.upstream)
    python = p.event_frames(sid, await fan.events_after(sid, 0, 10_000))
    built = p.replay_frames(sid, await fan.frames_after(sid, 0, 10_000))
    assert len(built) == len(python) == expected
    for (seq, want), (bseq, got) in zip(python, built, strict=True):
        assert bseq == seq
        assert json.loads(got) == json.loads(want), (sid, seq)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_every_captured_event_replays_as_the_python_frame(
    store: EventStore, engine: AsyncEngine, scenario: str
) -> None:
    lines = (CAPTURES / scenario / "durable.sse").read_text().splitlines()
    events = [normalize(parse_frame(line[6:])) for line in lines if line.startswith("data: ")]
    events = [e for e in events if e.seq is not None]
    assert events, "a scenario with durable events"
    sid = events[0].envelope.aggregate_id or events[0].envelope.session_id
    assert sid is not None
    epoch, _ = await store.claim(sid, "owner-1")
    mine = [e for e in events if (e.envelope.aggregate_id or sid) == sid]
    await store.write_batch(sid, epoch, mine, RECEIVED_AT)
    await assert_frames_equal(engine, store, sid, len({e.seq for e in mine}))


@pytest.mark.parametrize("scenario", sorted(STORES))
async def test_every_captured_legacy_session_replays_as_the_python_frame(
    store: EventStore, engine: AsyncEngine, scenario: str
) -> None:
    sid, events = legacy_session(scenario)
    events = [e for e in events if e.seq is not None]  # the persisted ones; live-only ones are relayed
    epoch, _ = await store.claim(sid, "owner-1")
    await store.write_batch(sid, epoch, events, RECEIVED_AT)
    await assert_frames_equal(engine, store, sid, len({e.seq for e in events}))


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
    {"type_": "session.next.tool.called", "data": {"callID": "c2", "tool": "bash", "input": {"a": None, "b": [1]}}},
    {"type_": "session.next.tool.called", "data": {"callID": "c3", "tool": "bash", "input": None}},
    {"type_": "session.next.tool.success", "data": {"callID": "c2", "content": [{"type": "text", "text": "a"},
                                                    {"type": "image"}, {"type": "text", "text": 5},
                                                    {"type": "text", "text": "b"}]}},
    {"type_": "session.next.tool.success", "data": {"callID": "c4", "content": [],
                                                    "structured": {"content": "from structured"}}},
    {"type_": "session.next.tool.success", "data": {"callID": "c5", "content": []}},
    {"type_": "session.next.tool.success", "data": {"callID": "c6", "content": "not a list",
                                                    "structured": ["not", "an", "object"]}},
    {"type_": "session.next.tool.failed", "data": {"callID": "c7", "input": {"x": 1}, "error": {"message": "m"}}},
]


async def test_odd_stored_envelopes_replay_as_the_python_frame(store: EventStore, engine: AsyncEngine) -> None:
    sid = "ses_odd_shapes"
    epoch, _ = await store.claim(sid, "owner-1")
    events = [chat_event(i + 1, session_id=sid, **kw) for i, kw in enumerate(ODD)]
    events = [normalize(e.envelope) for e in events]
    await store.write_batch(sid, epoch, events, RECEIVED_AT)
    await assert_frames_equal(engine, store, sid, len(ODD))
