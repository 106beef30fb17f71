"""The driver port's contract (bridge.upstream.driver), one suite for every driver: the in-memory twin,
the 1.x driver on the 1.x fake upstream and the 2.x driver on the fake 2.x serve (both on real sockets,
speaking their generation's wire format). A driver that passes it can stand behind the daemon's parts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from bridge.errors import SessionNotFound, UpstreamError
from bridge.upstream.client import UpstreamClient
from bridge.upstream.driver import FROM_START, SWEEP, Change, ListedSession, LogRead, UpstreamDriver
from bridge.upstream.driver_twin import MemoryDriver
from bridge.upstream.gen1_driver import Gen1Driver
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.http_base import UpstreamHttp
from tests.support.fake_gen2 import FakeGen2Serve
from tests.support.fake_upstream import FakeUpstream

T = TypeVar("T")
DIR = "/srv/agent/proj"


class World:
    """A serve of one generation as the suite plays it, and the driver that reads it."""

    driver: UpstreamDriver
    first_seq = 1  # the lowest seq a log read from the start yields

    def add(self, sid: str) -> None: ...

    async def append(self, sid: str, text: str, seq: int | None = None) -> int: ...

    def set_running(self, sids: set[str]) -> None: ...

    def drop_hints(self) -> None: ...


class MemoryWorld(World):
    def __init__(self) -> None:
        self.twin = MemoryDriver()
        self.driver = self.twin

    def add(self, sid: str) -> None:
        self.twin.add_session(sid, DIR)

    async def append(self, sid: str, text: str, seq: int | None = None) -> int:
        env = await self.twin.append(sid, "session.text.ended", {"assistantMessageID": "m", "ordinal": 0,
                                                                  "text": text}, seq=seq)
        assert env.seq is not None
        return env.seq

    def set_running(self, sids: set[str]) -> None:
        self.twin.running = set(sids)

    def drop_hints(self) -> None:
        self.twin.drop_changes()


class Gen1World(World):
    def __init__(self, fake: FakeUpstream, client: UpstreamClient) -> None:
        self.fake = fake
        self.driver = Gen1Driver(client)

    def add(self, sid: str) -> None:
        self.fake.add_session(sid)

    async def append(self, sid: str, text: str, seq: int | None = None) -> int:
        env = await self.fake.append(sid, "session.next.text.ended", {"assistantMessageID": "m", "textID": "t",
                                                                       "text": text}, seq=seq)
        return int(env["durable"]["seq"])

    def set_running(self, sids: set[str]) -> None:
        self.fake.active = {sid: {"type": "busy"} for sid in sids}

    def drop_hints(self) -> None:
        self.fake.drop_global()


class Gen2World(World):
    first_seq = 0  # 2.x's log holds `session.created` at seq 0

    def __init__(self, serve: FakeGen2Serve, http: UpstreamHttp) -> None:
        self.serve = serve
        self.driver = Gen2Driver(http)

    def add(self, sid: str) -> None:
        self.serve.add_session(sid, DIR)

    async def append(self, sid: str, text: str, seq: int | None = None) -> int:
        env = await self.serve.append(sid, "session.text.ended", {"assistantMessageID": "m", "ordinal": 0,
                                                                   "text": text}, seq=seq)
        return int(env["durable"]["seq"])

    def set_running(self, sids: set[str]) -> None:
        self.serve.active = set(sids)

    def drop_hints(self) -> None:
        self.serve.drop_connections()


@pytest_asyncio.fixture(params=["memory", "gen1", "gen2"])
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    if request.param == "memory":
        yield MemoryWorld()
    elif request.param == "gen1":
        fake = FakeUpstream()
        await fake.start()
        async with UpstreamClient(fake.url) as client:
            yield Gen1World(fake, client)
        await fake.stop()
    else:
        serve = FakeGen2Serve()
        await serve.start()
        async with UpstreamHttp(serve.url, "opencode", "pw") as http:
            yield Gen2World(serve, http)
        await serve.stop()


async def take(items: AsyncIterator[T], n: int, timeout: float = 10.0) -> list[T]:
    out: list[T] = []
    async with asyncio.timeout(timeout):
        async for item in items:
            out.append(item)
            if len(out) >= n:
                break
    return out


async def seqs_of(reads: AsyncIterator[LogRead], n: int) -> list[int]:
    got: list[int] = []
    async with asyncio.timeout(10.0):
        async for read in reads:
            assert not read.bad
            got += [e.seq for e in read.envelopes if e.seq is not None]
            if len(got) >= n:
                return got
    return got


async def test_lists_sessions_with_their_directories(world: World) -> None:
    world.add("ses_A")
    world.add("ses_B")
    listed = sorted(await world.driver.list_sessions(), key=lambda s: s.id)
    assert [(s.id, s.directory) for s in listed] == [("ses_A", DIR), ("ses_B", DIR)]
    assert all(isinstance(s, ListedSession) for s in listed)


async def test_follow_yields_exactly_what_follows_the_cursor_then_what_is_appended(world: World) -> None:
    world.add("ses_A")
    for i in range(4):
        await world.append("ses_A", f"t{i}")
    async with world.driver.follow("ses_A", 2) as reads:
        assert await seqs_of(reads, 2) == [3, 4]
        gap = await world.append("ses_A", "after a gap", seq=9)  # seqs may jump; order and values kept
        nxt = await world.append("ses_A", "next")
        assert await seqs_of(reads, 2) == [gap, nxt] == [9, 10]


async def test_follow_from_the_start_and_past_the_head(world: World) -> None:
    world.add("ses_A")
    await world.append("ses_A", "one")
    await world.append("ses_A", "two")
    async with world.driver.follow("ses_A", FROM_START) as reads:
        got = await seqs_of(reads, 3 - world.first_seq)
    assert got == list(range(world.first_seq, 3))

    async def read_one() -> list[int]:
        # At the head nothing comes until the next append (1.x even holds its headers back, §3.3).
        async with world.driver.follow("ses_A", 2) as reads:
            return await seqs_of(reads, 1)

    waiting = asyncio.ensure_future(read_one())
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await world.append("ses_A", "three")
    assert await asyncio.wait_for(waiting, 10) == [3]


async def test_changes_start_with_a_sweep_hint_appends_and_sweep_again_after_a_reconnect(world: World) -> None:
    world.add("ses_A")
    async with world.driver.changes() as changes:
        assert await take(changes, 1) == [SWEEP]
        seq = await world.append("ses_A", "x")
        got: list[Change] = await take(changes, 1)
        assert got[0].kind == "hint" and got[0].session_id == "ses_A" and (got[0].seq or 0) >= seq
        world.drop_hints()
        with contextlib.suppress(UpstreamError):
            rest = [c async for c in changes]
            assert all(c.kind == "hint" for c in rest)
    async with world.driver.changes() as again:
        assert await take(again, 1) == [SWEEP]


async def test_turn_state(world: World) -> None:
    world.add("ses_A")
    world.add("ses_B")
    assert await world.driver.running_sessions() == set()
    world.set_running({"ses_B"})
    assert await world.driver.running_sessions() == {"ses_B"}


async def test_an_unknown_session_is_not_found(world: World) -> None:
    world.add("ses_A")
    with pytest.raises(SessionNotFound):
        async with world.driver.follow("ses_NOPE", 0) as reads:
            await seqs_of(reads, 1)


@pytest_asyncio.fixture(params=["memory", "gen2"])
async def commanded(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    """The worlds whose serve answers commands (the 1.x fake answers reads only: the 1.x driver's command
    calls are checked request by request in tests/unit/test_driver_gen1.py)."""
    if request.param == "memory":
        yield MemoryWorld()
        return
    serve = FakeGen2Serve()
    await serve.start()
    async with UpstreamHttp(serve.url, "opencode", "pw") as http:
        yield Gen2World(serve, http)
    await serve.stop()


async def test_commands_exactly_once(commanded: World) -> None:
    world = commanded
    world.add("ses_A")
    first = await world.driver.prompt("ses_A", DIR, "msg_p1", "hello", "steer")
    again = await world.driver.prompt("ses_A", DIR, "msg_p1", "hello", "steer")
    assert first.message_id == again.message_id == "msg_p1" and first.inbox_id == again.inbox_id
    with pytest.raises(UpstreamError) as conflict:
        await world.driver.prompt("ses_A", DIR, "msg_p1", "another body", "steer")
    assert conflict.value.status == 409
    async with world.driver.follow("ses_A", FROM_START) as reads:
        admitted: list[Any] = []
        async with asyncio.timeout(10):
            async for read in reads:
                admitted += [e for e in read.envelopes if "admitted" in e.type]
                if admitted:
                    break
    assert len(admitted) == 1  # one admission for two identical prompts
    assert await world.driver.interrupt("ses_A", DIR) is False  # idle: nothing interrupted, and it says so
    world.set_running({"ses_A"})
    assert await world.driver.interrupt("ses_A", DIR) is True
    await world.driver.switch_model("ses_A", DIR, "mock", "mock-2")
    await world.driver.switch_agent("ses_A", DIR, "plan")
    await world.driver.reply_permission("ses_A", DIR, "per_1", "once")
