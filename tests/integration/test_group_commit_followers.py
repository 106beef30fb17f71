"""Real followers (`DurableFollower`) against the fake upstream, their sinks (`StoreSink` → `write_batch`)
behind one group committer: many sessions mirrored exactly, a connection cut mid-body and a superseded
lease handled as with one transaction per batch."""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerSettings
from bridge.upstream.store_sink import StoreSink
from tests.support.fake_upstream import FakeUpstream
from tests.support.group_commits import Groups
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:group"


async def turn(fake: FakeUpstream, sid: str, n: int = 6) -> None:
    for i in range(n):
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "msg_a", "textID": f"t{i}",
                                                            "text": f"{sid} part {i}"})


async def follow(store: EventStore, client: UpstreamClient, sid: str) -> asyncio.Task[FollowerExit]:
    epoch, cursor = await store.claim(sid, "test-owner")
    f = DurableFollower(sid, client, StoreSink(store, sid, epoch), cursor, FollowerSettings(
        reconnect_min_s=0.01, reconnect_max_s=0.05, upstream=UPSTREAM))
    return asyncio.create_task(f.run())


async def mirrored(store: EventStore, fake: FakeUpstream, sids: list[str]) -> bool:
    for sid in sids:
        upstream = [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]
        if await stored_ids(store, sid) != upstream:
            return False
    return True


async def stop(tasks: list[asyncio.Task[FollowerExit]]) -> None:
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t


async def test_many_followers_mirror_exactly_through_one_committer(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, UPSTREAM)
    sids = [f"ses_gf{k:03d}" for k in range(30)]
    for sid in sids:
        fake.add_session(sid)
        await turn(fake, sid, 3)  # history before the followers start: catch-up
    groups = Groups()
    async with store.group_commit():
        tasks = [await follow(store, fake_client, sid) for sid in sids]
        await wait_until(lambda: mirrored(store, fake, sids), 30, 0.05, message="history mirrored")
        for sid in sids:
            await turn(fake, sid)  # live, all sessions at once
        fake.drop_connections()  # cut every stream mid-body: replayed after reconnect, never twice
        for sid in sids:
            await turn(fake, sid, 2)
        await wait_until(lambda: mirrored(store, fake, sids), 30, 0.05, message="stream mirrored")
        await stop(tasks)
        assert groups.committed < groups.writes  # batches of different sessions shared transactions
    reader = AuditReader(engine, UPSTREAM)
    for sid in sids:
        session = await store.get_session(sid)
        assert session is not None and session.cursor_seq == 11
        assert verify_chain(await reader.chain_rows(sid)).ok


async def test_a_superseded_follower_stops_with_lease_lost_and_writes_nothing_more(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, UPSTREAM)
    fake.add_session("ses_A")
    fake.add_session("ses_B")
    await turn(fake, "ses_A")
    async with store.group_commit():
        task_a, task_b = await follow(store, fake_client, "ses_A"), await follow(store, fake_client, "ses_B")
        await wait_until(lambda: mirrored(store, fake, ["ses_A"]), 10, 0.02, message="ses_A mirrored")
        await store.claim("ses_A", "another-owner", holder_dead=lambda _owner: True)  # the epoch moves on
        await turn(fake, "ses_A")
        await turn(fake, "ses_B")
        assert await asyncio.wait_for(task_a, 10) is FollowerExit.LEASE_LOST
        await wait_until(lambda: mirrored(store, fake, ["ses_B"]), 10, 0.02, message="ses_B mirrored")
        await stop([task_b])
    assert len(await stored_ids(store, "ses_A")) == 6
