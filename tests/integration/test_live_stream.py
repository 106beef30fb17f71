"""The global /global/event reader against the fake upstream: live only, so it must reconnect at
once after a clean EOF (docs/upstream.md §15), reconnect when heartbeats stop, and
survive bad frames and handler bugs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from bridge import metrics
from bridge.events import ChatEvent
from bridge.upstream.client import UpstreamClient
from bridge.upstream.live import LiveStream
from tests.support.fake_upstream import FakeUpstream
from tests.support.tasks import in_background
from tests.support.waiting import wait_until


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.connects = 0
        self.events: list[ChatEvent] = []
        self.fail_on = fail_on

    async def on_live_connected(self) -> None:
        self.connects += 1

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None:
        if ev.type == self.fail_on:
            raise RuntimeError("handler bug")
        if ev.kind != "server:connected":  # sent first on every connection
            self.events.append(ev)




@contextlib.asynccontextmanager
async def running(fake: FakeUpstream, rec: Recorder, **kw: float) -> AsyncIterator[LiveStream]:
    async with UpstreamClient(fake.url) as client:
        live = LiveStream(client, rec, reconnect_min_s=0.05, reconnect_max_s=0.2, **kw)
        async with in_background(live.run()):
            yield live


def envelope(sid: str, type_: str, seq: int | None = None) -> dict[str, object]:
    env: dict[str, object] = {"id": f"evt_{type_}_{seq}", "type": type_, "location": {"directory": "/p"},
                              "data": {"sessionID": sid, "timestamp": 1}}
    if seq is not None:
        env["durable"] = {"aggregateID": sid, "seq": seq, "version": 1}
    return env


async def test_events_reach_the_handler_and_noise_does_not(fake: FakeUpstream) -> None:
    rec = Recorder()
    async with running(fake, rec):
        await wait_until(lambda: fake.global_subscribers, 20, 0.01)
        fake.publish_live({"id": "evt_n", "type": "plugin.added", "location": {}, "data": {}})
        fake.publish_live(envelope("ses_A", "session.next.text.delta"))
        fake.publish_live(envelope("ses_A", "session.next.step.started", 3))
        await wait_until(lambda: len(rec.events) == 3, 20, 0.01)
    # a persisted event comes twice: its bus copy (no seq) and its sync twin (the sync log's seq)
    assert [(e.kind, e.seq) for e in rec.events] == [("delta:text", None), ("step:start", None), ("step:start", 3)]
    assert rec.events[2].envelope.session_id == "ses_A"


async def test_a_clean_eof_is_reconnected_at_once_and_the_handler_resyncs(fake: FakeUpstream) -> None:
    rec = Recorder()
    before = metrics.UPSTREAM_RECONNECTS.labels(stream="live", cause="eof")._value.get()
    async with running(fake, rec, heartbeat_timeout_s=30) as live:
        live.HEALTHY_AFTER_S = 0.0  # every connection counts as one that lived: its EOF is "normal"
        await wait_until(lambda: live.connections == 1, 20, 0.01)
        fake.drop_global(clean=True)
        await wait_until(lambda: live.connections == 2 and rec.connects == 2, 20, 0.01)
        fake.publish_live(envelope("ses_B", "session.created", 0))
        await wait_until(lambda: rec.events, 20, 0.01)
    assert metrics.UPSTREAM_RECONNECTS.labels(stream="live", cause="eof")._value.get() == before + 1


async def test_silence_past_the_heartbeat_timeout_reconnects(fake: FakeUpstream) -> None:
    rec = Recorder()
    async with running(fake, rec, heartbeat_timeout_s=0.3) as live:
        # The fake sends `server.connected` only at connect: then it is silent, like a hung server.
        await wait_until(lambda: live.connections >= 3, 10, 0.02, message="reconnects after silence")


async def test_bad_frames_and_handler_bugs_do_not_stop_the_stream(fake: FakeUpstream) -> None:
    rec = Recorder(fail_on="session.next.prompted")
    async with running(fake, rec) as live:
        await wait_until(lambda: fake.global_subscribers, 20, 0.01)
        fake.publish_live_raw(b"data: {broken\n\n")
        fake.publish_live(envelope("ses_A", "session.next.prompted", 2))  # the handler raises on this one
        fake.publish_live(envelope("ses_A", "session.next.step.started", 3))
        await wait_until(lambda: len(rec.events) == 2, 20, 0.01)
        assert live.connections == 1
    assert [e.type for e in rec.events] == ["session.next.step.started"] * 2  # bus copy and twin
