"""`PortFollower` on the driver port's in-memory twin (no I/O): writes what follows the cursor once, in
order, with gaps; skips what a repeated read sends again; keeps bad frames; rewinds on a refused write;
tells turn starts and ends; ends GONE, BAD_CURSOR, LEASE_LOST or STOPPED as its owner needs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from bridge.errors import CursorBehind, InvalidRequest, LeaseLost
from bridge.events import ChatEvent
from bridge.events.envelope import parse_envelope
from bridge.events.kinds import Kind
from bridge.upstream.driver import LogRead, Rejected
from bridge.upstream.driver_twin import MemoryDriver
from bridge.upstream.follower import FollowerExit
from bridge.upstream.port_follower import PortFollower, PortHooks, PortSettings
from tests.support.waiting import wait_until

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"


class Sink:
    def __init__(self, cursor: int = -1) -> None:
        self.rows: list[tuple[int, str]] = []
        self.rejects: list[tuple[str, str]] = []
        self.cursor = cursor
        self.refuse_next: CursorBehind | LeaseLost | None = None

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        if self.refuse_next is not None:
            e, self.refuse_next = self.refuse_next, None
            raise e
        for ev in events:
            assert ev.seq is not None and ev.seq > self.cursor
            self.rows.append((ev.seq, ev.kind))
            self.cursor = ev.seq
        return self.cursor

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        self.rejects.append((reason, raw))


def follower(driver: MemoryDriver, sink: Sink, cursor: int = -1, **kw: object) -> PortFollower:
    return PortFollower(driver, SID, sink, cursor, PortSettings(0.001, 0.01), PortHooks(**kw))  # type: ignore[arg-type]


async def text(d: MemoryDriver, i: int, seq: int | None = None) -> None:
    await d.append(SID, "session.text.ended", {"assistantMessageID": "m", "ordinal": i, "text": str(i)}, seq=seq)


async def test_writes_what_follows_the_cursor_once_in_order_with_gaps_and_turns() -> None:
    d = MemoryDriver(2)
    d.add_session(SID)
    for i in range(3):
        await text(d, i)
    turns: list[tuple[str, bool]] = []
    committed: list[int] = []
    sink = Sink(1)
    f = follower(d, sink, 1, on_turn=lambda s, busy: turns.append((s, busy)),
                 on_committed=lambda evs: committed.append(len(evs)))
    task = asyncio.create_task(f.run())
    await wait_until(lambda: sink.cursor == 3, 5, 0.005)
    await d.append(SID, "session.execution.started", {})
    await text(d, 9, seq=10)
    await d.append(SID, "session.execution.succeeded", {})
    await wait_until(lambda: sink.cursor == 11, 5, 0.005)
    f.stop()
    assert await asyncio.wait_for(task, 5) is FollowerExit.STOPPED
    assert [s for s, _ in sink.rows] == [2, 3, 4, 10, 11]
    assert sink.rows[2][1] == Kind.NOISE and sink.rows[3][1] == Kind.TEXT_END
    assert turns == [(SID, True), (SID, False)] and sum(committed) == 5


class Repeating(MemoryDriver):
    """Every read sends the whole log again first (what a serve may do after a reconnect), then a bad frame."""

    @asynccontextmanager
    async def follow(self, session_id: str, after: int) -> AsyncIterator[AsyncIterator[LogRead]]:
        async def reads() -> AsyncIterator[LogRead]:
            yield LogRead(list(self.logs[session_id]), [Rejected("bad_json", "x", "{nope")])
            await asyncio.Event().wait()

        yield reads()


async def test_repeats_are_skipped_and_bad_frames_kept() -> None:
    d = Repeating(2)
    d.add_session(SID)
    for i in range(3):
        await text(d, i)
    sink = Sink(1)
    f = follower(d, sink, 1)
    task = asyncio.create_task(f.run())
    await wait_until(lambda: sink.rejects, 5, 0.005)
    f.stop()
    await task
    assert [s for s, _ in sink.rows] == [2, 3] and sink.rejects == [("bad_json", "{nope")]
    env = parse_envelope({"id": "evt_n", "type": "session.text.ended", "data": {}})  # no seq in a log: kept aside
    await f._write(LogRead([env]))
    assert sink.rejects[-1][0] == "no_seq"


async def test_a_refused_write_rewinds_to_the_stored_cursor_and_reads_again() -> None:
    d = MemoryDriver(2)
    d.add_session(SID)
    for i in range(4):
        await text(d, i)
    sink = Sink(-1)
    sink.refuse_next = CursorBehind(SID, 4, -1)
    f = follower(d, sink)
    task = asyncio.create_task(f.run())
    await wait_until(lambda: sink.cursor == 4, 5, 0.005)
    f.stop()
    await task
    assert [s for s, _ in sink.rows] == [1, 2, 3, 4] and f.reconnects >= 1


async def test_how_it_ends() -> None:
    assert await asyncio.wait_for(follower(MemoryDriver(2), Sink()).run(), 5) is FollowerExit.GONE
    d = MemoryDriver(2)
    d.add_session(SID)
    await text(d, 0)
    sink = Sink()
    sink.refuse_next = LeaseLost("fenced")
    assert await asyncio.wait_for(follower(d, sink).run(), 5) is FollowerExit.LEASE_LOST

    class BadCursor(MemoryDriver):
        @asynccontextmanager
        async def follow(self, session_id: str, after: int) -> AsyncIterator[AsyncIterator[LogRead]]:
            raise InvalidRequest("GET …/log: HTTP 400", 400, "InvalidRequestError")
            yield  # pragma: no cover

    bad = BadCursor(2)
    bad.add_session(SID)
    assert await asyncio.wait_for(follower(bad, Sink()).run(), 5) is FollowerExit.BAD_CURSOR
