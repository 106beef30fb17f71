"""The global `/global/event` reader driven through an in-memory transport (no sockets)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from bridge import metrics
from bridge.events import ChatEvent, Kind
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import global_frames
from tests.support.memory_upstream import MemoryUpstream, sse
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
