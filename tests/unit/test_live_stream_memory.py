"""The global `/global/event` reader driven through an in-memory transport (no sockets)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge import metrics
from bridge.events import ChatEvent, Kind
from bridge.events.global_peek import DurableTwin
from bridge.events.syncframes import GlobalFrame, parse_global_frame
from bridge.upstream import live as live_module
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import global_frames
from tests.support.memory_upstream import MemoryUpstream, sse
from tests.support.metric_values import Since
from tests.support.tasks import in_background
from tests.support.waiting import wait_until


class Recorder:
    def __init__(self) -> None:
        self.connects = 0
        self.events: list[ChatEvent] = []
        self.directories: list[str | None] = []

    async def on_live_connected(self) -> None:
        self.connects += 1

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None:
        self.events.append(ev)
        self.directories.append(directory)


def live_env(sid: Any, type_: str = "session.next.text.delta", **data: Any) -> dict[str, Any]:
    return {"id": f"evt_{type_}", "type": type_, "location": {"directory": "/p"},
            "data": {"sessionID": sid, "timestamp": 1, **data}}


def frames(*envs: dict[str, Any]) -> bytes:
    """The `/global/event` frames of these events (bus copy, and sync twin when persisted)."""
    return sse(*[f for e in envs for f in global_frames(e, e["location"]["directory"])])


@contextlib.asynccontextmanager
async def running(up: MemoryUpstream, rec: Recorder) -> AsyncIterator[LiveStream]:
    live = LiveStream(up.client(), rec, reconnect_min_s=0.001, reconnect_max_s=0.01)
    async with in_background(live.run()):
        yield live


async def test_events_reach_the_handler_with_their_kind_and_noise_does_not() -> None:
    up, rec = MemoryUpstream(), Recorder()
    async with running(up, rec):
        heartbeat = {"directory": "global", "payload": {"id": "evt_hb", "type": "server.heartbeat", "properties": {}}}
        up.push_live(sse(heartbeat) + frames(live_env("ses_A", "plugin.added"), live_env("ses_A", delta="Hi")))
        await wait_until(lambda: rec.events, 5, 0.001, message="delta delivered")
    assert [(e.kind, e.text) for e in rec.events] == [(Kind.DELTA_TEXT, "Hi")]
    assert rec.directories == ["/p"]


async def test_a_legacy_delta_of_a_part_announced_as_text_is_a_text_delta() -> None:
    up, rec = MemoryUpstream(), Recorder()
    part = {"id": "prt_1", "type": "text", "text": "", "messageID": "msg_a", "sessionID": "ses_A", "time": {"start": 1}}
    updated = {"id": "evt_u", "type": "message.part.updated", "location": {"directory": "/p"},
               "durable": {"aggregateID": "ses_A", "seq": 4, "version": 1},
               "data": {"sessionID": "ses_A", "part": part, "time": 1}}
    delta = {"id": "evt_d", "type": "message.part.delta", "location": {"directory": "/p"},
             "data": {"sessionID": "ses_A", "messageID": "msg_a", "partID": "prt_1", "field": "text", "delta": "He"}}
    async with running(up, rec):
        up.push_live(frames(updated, delta))
        await wait_until(lambda: len(rec.events) == 3, 5, 0.001, message="bus, twin, delta delivered")
    assert [(e.type, e.seq) for e in rec.events] == [
        ("message.part.updated", None), ("message.part.updated", 4), ("message.part.delta", None)]
    assert (rec.events[2].kind, rec.events[2].text) == (Kind.DELTA_TEXT, "He")


async def test_an_event_for_an_id_of_the_wrong_shape_never_reaches_the_handler() -> None:
    up, rec = MemoryUpstream(), Recorder()
    before = metrics.REJECTS.labels(reason="live_bad_session_id")._value.get()
    async with running(up, rec):
        up.push_live(frames(live_env("ses_A\x00"), live_env("x/../ses_B"), live_env("ses_ok", delta="after")))
        await wait_until(lambda: rec.events, 5, 0.001, message="the valid event delivered")
    assert [e.session_id for e in rec.events] == ["ses_ok"]
    assert metrics.REJECTS.labels(reason="live_bad_session_id")._value.get() == before + 2


async def test_a_clean_eof_reconnects_and_tells_the_handler_again() -> None:
    up, rec = MemoryUpstream(), Recorder()
    async with running(up, rec) as live:
        await wait_until(lambda: live.connections == 1, 5, 0.001, message="connected")
        up.end_live()
        await wait_until(lambda: live.connections == 2 and rec.connects == 2, 5, 0.001, message="reconnected")
    assert up.paths == ["/global/event", "/global/event"]


def test_a_nul_in_location_directory_is_no_directory() -> None:
    from bridge.events import location_directory

    assert location_directory({"location": {"directory": "/a\x00b"}}) is None
    assert location_directory({"location": {"directory": "/a"}}) == "/a"
    assert location_directory({"location": "x"}) is None


# -- frames of sessions the handler has no use for: dropped before decoding (docs/operations.md "Workers") -------

class Twins(Recorder):
    """A handler that takes v2 twins undecoded (bridge.dispatch.LiveDispatch does)."""

    def __init__(self) -> None:
        super().__init__()
        self.twins: list[tuple[str, int]] = []

    async def on_durable_twin(self, twin: DurableTwin) -> None:
        self.twins.append((twin.session_id, twin.seq))


class Choosy(Twins):
    """A worker's handler: also has no use for the sessions `elsewhere` (a peer's)."""

    def __init__(self, *elsewhere: str) -> None:
        super().__init__()
        self.elsewhere = set(elsewhere)

    def live_skip_reason(self, session_id: str) -> str | None:
        return "held_elsewhere" if session_id in self.elsewhere else None


def compact(*frames: dict[str, Any]) -> bytes:
    """`/global/event` frames as the serve writes them (compact JSON)."""
    return b"".join(f"data: {json.dumps(f, separators=(',', ':'))}\n\n".encode() for f in frames)


def turn(sid: str) -> list[dict[str, Any]]:
    """One session's frames of each kind: a v2 event (bus copy, twin), a legacy part (bus, twin), two deltas,
    a status and a question (those two every worker decodes)."""
    part = {"id": "prt_1", "type": "text", "text": "", "messageID": "msg_a", "sessionID": sid, "time": {"start": 1}}
    envs = [
        {"id": "evt_e", "type": "session.next.text.ended", "durable": {"aggregateID": sid, "seq": 5, "version": 1},
         "data": {"sessionID": sid, "timestamp": 1, "assistantMessageID": "msg_a", "textID": "t", "text": "Hi"}},
        {"id": "evt_u", "type": "message.part.updated", "durable": {"aggregateID": sid, "seq": 6, "version": 1},
         "data": {"sessionID": sid, "part": part, "time": 1}},
        {"id": "evt_d", "type": "session.next.text.delta",
         "data": {"timestamp": 1, "sessionID": sid, "assistantMessageID": "msg_a", "textID": "t", "delta": "H"}},
        {"id": "evt_l", "type": "message.part.delta",
         "data": {"sessionID": sid, "messageID": "msg_a", "partID": "prt_1", "field": "text", "delta": "He"}},
        {"id": "evt_s", "type": "session.status", "data": {"sessionID": sid, "status": {"type": "busy"}}},
        {"id": "evt_q", "type": "question.asked", "data": {"id": "que_1", "sessionID": sid, "questions": []}},
    ]
    return [f for e in envs for f in global_frames(e, "/p")]


async def test_the_frames_of_a_session_of_no_use_here_are_dropped_before_decoding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[str] = []

    def counting(data: str | bytes) -> GlobalFrame:
        frame = parse_global_frame(data)
        decoded.append(f"{frame.envelope.session_id}:{frame.envelope.type}:{frame.twin}")
        return frame

    monkeypatch.setattr(live_module, "parse_global_frame", counting)
    up, rec = MemoryUpstream(), Choosy("ses_peer")
    skipped = Since("bridge_live_frames_skipped_total", reason="held_elsewhere")
    async with running(up, rec):
        up.push_live(compact(*turn("ses_mine"), *turn("ses_peer")))
        await wait_until(lambda: [e.type for e in rec.events if e.session_id == "ses_peer"] == [
            "session.status", "question.asked"], 5, 0.001, message="the peer's status and question")
    mine = [(e.type, e.seq) for e in rec.events if e.session_id == "ses_mine"]
    assert mine == [("message.part.updated", None), ("message.part.updated", 6), ("session.next.text.delta", None),
                    ("message.part.delta", None), ("session.status", None), ("question.asked", None)]
    assert rec.twins == [("ses_mine", 5)]
    # the peer's session: its v2 twin, legacy bus event and twin, and two deltas were never decoded
    assert [d for d in decoded if d.startswith("ses_peer")] == [
        "ses_peer:session.status:False", "ses_peer:question.asked:False"]
    assert skipped.value == 5


CAPTURED = b"".join(line.encode() + b"\n\n" for p in sorted(Path("fixtures/opencode-1.18.33").glob("*/global.sse"))
                    for line in p.read_text().splitlines() if line.startswith("data: "))


async def test_a_handler_that_skips_nothing_gets_every_captured_frame_as_before() -> None:
    """With nothing held elsewhere (BRIDGE_WORKERS=1, one replica) the look changes no outcome."""
    captured = CAPTURED
    end = compact({"payload": {"id": "evt_end", "type": "session.status",
                               "properties": {"sessionID": "ses_end", "status": {"type": "idle"}}}})
    seen = []
    for rec in (Twins(), Choosy()):
        up = MemoryUpstream()
        async with running(up, rec):
            up.push_live(captured + end)
            await wait_until(lambda r=rec: r.events and r.events[-1].session_id == "ses_end", 5, 0.001,  # type: ignore[misc]
                             message="every captured frame handled")
        seen.append([(e.type, e.session_id, e.seq, e.kind, e.text) for e in rec.events] + rec.twins)
    assert seen[0] == seen[1] and len(seen[0]) > 100
