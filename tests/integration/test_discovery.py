"""After a (re)connect the bridge warms only sessions with something new (bridge/sessions/discovery.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.config import Settings
from bridge.events import normalize, parse_envelope
from bridge.sessions.discovery import Discovery, sessions_to_warm
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until


async def events(fake: FakeUpstream, sid: str, n: int) -> None:
    fake.add_session(sid)
    for i in range(n):
        await fake.append(sid, "session.next.prompted", {"messageID": f"m{i}"})


async def store_up_to(store: EventStore, fake: FakeUpstream, sid: str, seq: int) -> None:
    epoch, _ = await store.claim(sid, "test")
    evs = [normalize(parse_envelope(e)) for e in fake.sessions[sid].events if e["durable"]["seq"] <= seq]
    await store.write_batch(sid, epoch, evs, datetime.now(UTC))
    await store.release(sid, epoch)


async def upstream_and_stored(store: EventStore, fake: FakeUpstream, sid: str, n: int,
                              stored: int | None = None) -> None:
    """n events upstream, the first `stored` of them (all by default) stored here."""
    await events(fake, sid, n)
    await store_up_to(store, fake, sid, n if stored is None else stored)


async def test_only_sessions_with_something_new_are_warmed(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, "fake")
    await upstream_and_stored(store, fake, "ses_caught_up", 3)
    await upstream_and_stored(store, fake, "ses_behind", 5, stored=2)
    await events(fake, "ses_new_with_events", 2)
    await events(fake, "ses_new_empty", 0)
    await upstream_and_stored(store, fake, "ses_vanished", 2)
    await fake.delete("ses_vanished")
    await events(fake, "ses_deleted_here", 2)
    await store.mark_deleted("ses_deleted_here")
    await upstream_and_stored(store, fake, "ses_active", 1)
    fake.active["ses_active"] = {"type": "running"}

    epoch, _ = await store.claim("ses_never_created", "test")  # subscribed to, never created upstream
    await store.release("ses_never_created", epoch)

    history_calls, sync_calls = fake.history_calls, fake.sync_calls
    found = {c.session_id: c.reason for c in await sessions_to_warm(fake_client, store)}

    assert found == {
        "ses_behind": "new_events",
        "ses_new_with_events": "new_events",
        "ses_new_empty": "new_events",  # listed, never stored: the real serve's log has its seq 0 (§14)
        "ses_vanished": "gone_upstream",  # no longer listed: its follower records the deletion
        "ses_active": "active",
    }
    # Only the stored, listed, cold sessions (caught_up, behind) were probed, in one sync-log call together;
    # never-stored ones and the vanished one cost no request.
    assert fake.history_calls == history_calls and fake.sync_calls == sync_calls + 1


async def test_a_session_whose_lease_is_held_is_not_even_probed(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, "fake")
    await upstream_and_stored(store, fake, "ses_held", 5, stored=2)
    await store.claim("ses_held", "host-b:200:peer", lease_ttl_s=60)  # a peer follows it (or will be adopted)
    fake.active["ses_held"] = {"type": "running"}

    assert await sessions_to_warm(fake_client, store) == []
    assert fake.history_calls == 0 and fake.sync_calls == 0


async def test_a_session_deleted_upstream_while_the_bridge_was_away_is_tombstoned_by_its_follower(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, "fake")
    await upstream_and_stored(store, fake, "ses_vanished", 2)
    await upstream_and_stored(store, fake, "ses_kept", 2)
    await fake.delete("ses_vanished")  # its live `session.deleted` reaches nobody: no bridge runs
    settings = Settings(upstream_name="fake", reconnect_min_s=0.01, reconnect_max_s=0.05, idle_ttl_s=3600.0)
    sup = FollowerSupervisor(store, fake_client, settings, "host:1:disc")
    async with sup.started():
        discovery = Discovery(fake_client, store, sup, min_interval_s=60, retry_min_s=0.1, retry_max_s=1)
        assert await discovery.once()

        async def tombstoned() -> bool:
            row = await store.get_session("ses_vanished")
            return row is not None and row.deleted

        await wait_until(tombstoned, 10, 0.05, message="the follower met the 404 and recorded the deletion")
        assert "ses_kept" not in sup.warm_sessions()  # caught up: not warmed
