"""The parent's `/global/event` tee (bridge.workers.live_tee) against the fake upstream: one connection to the
serve for any number of workers; a worker that joins later gets the stream's opening event, then whole events
from the moment it joined; when the serve's stream is cut every worker's stream ends, and the tee reconnects."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from bridge.upstream.client import UpstreamClient
from bridge.upstream.sse import SSEEvent, SSEParser
from bridge.workers.child import WorkerContext
from bridge.workers.live_tee import LiveTee, serving_tee
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until


@pytest_asyncio.fixture
async def tee_socket(fake: FakeUpstream) -> AsyncIterator[tuple[LiveTee, str]]:
    with tempfile.TemporaryDirectory(prefix="tee-") as d:
        path = str(Path(d) / "live.sock")
        async with UpstreamClient(fake.url) as client:
            tee = LiveTee(client, heartbeat_timeout_s=30, reconnect_min_s=0.05, reconnect_max_s=0.2)
            async with serving_tee(tee, path):
                yield tee, path


class Worker:
    """A worker's reader of the tee, through the client a worker uses (WorkerContext.live_client)."""

    def __init__(self, path: str) -> None:
        self.context = WorkerContext(0, (), path, 0)
        self.frames: list[str] = []
        self.ended = asyncio.Event()

    async def read(self) -> None:
        parser = SSEParser()
        async with self.context.live_client() as client, client.open_global_events() as body:
            async for chunk in body:
                self.frames += [e.data for e in parser.feed(chunk) if isinstance(e, SSEEvent)]
        self.ended.set()


def frame(n: int) -> dict[str, object]:
    return {"directory": "/p", "payload": {"id": f"evt_t{n}", "type": "session.status",
                                           "properties": {"sessionID": "ses_tee", "status": {"type": "idle"}}}}


async def test_workers_share_one_connection_join_at_an_event_and_end_with_the_serve(
        fake: FakeUpstream, tee_socket: tuple[LiveTee, str]) -> None:
    tee, path = tee_socket
    first = Worker(path)
    reading = [asyncio.create_task(first.read())]
    await wait_until(lambda: fake.global_subscribers == 1, 10, 0.02, message="the tee connected")
    fake.publish_global(frame(1))
    await wait_until(lambda: len(first.frames) == 2, 10, 0.02, message="the first worker got event 1")

    second = Worker(path)
    reading.append(asyncio.create_task(second.read()))
    await wait_until(lambda: tee.readers == 2, 10, 0.02, message="the second worker joined")
    for n in (2, 3):
        fake.publish_global(frame(n))
    await wait_until(lambda: len(first.frames) == 4 and len(second.frames) == 3, 10, 0.02,
                     message="both got events 2 and 3")
    assert fake.global_subscribers == 1 and tee.connections == 1
    assert '"server.connected"' in first.frames[0] and second.frames[0] == first.frames[0]
    assert second.frames[1:] == first.frames[2:]  # from where it joined, whole events, in order

    fake.drop_global()  # the serve's stream cut mid-body: every worker's stream ends
    await asyncio.wait_for(asyncio.gather(first.ended.wait(), second.ended.wait()), 10)
    await asyncio.gather(*reading)
    await wait_until(lambda: tee.connections == 2 and fake.global_subscribers == 1, 10, 0.02,
                     message="the tee reconnected")
    again = Worker(path)
    task = asyncio.create_task(again.read())
    await wait_until(lambda: len(again.frames) == 1, 10, 0.02, message="a worker joins the new connection")
    assert '"server.connected"' in again.frames[0] and again.frames[0] != first.frames[0]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
