"""After a (re)connect the bridge warms only sessions with something new (bridge/sessions/discovery.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import normalize, parse_envelope
from bridge.sessions.discovery import sessions_to_warm
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream


async def events(fake: FakeUpstream, sid: str, n: int) -> None:
    fake.add_session(sid)
    for i in range(n):
        await fake.append(sid, "session.next.prompted", {"messageID": f"m{i}"})


async def store_up_to(store: EventStore, fake: FakeUpstream, sid: str, seq: int) -> None:
    epoch, _ = await store.claim(sid, "test")
    evs = [normalize(parse_envelope(e)) for e in fake.sessions[sid].events if e["durable"]["seq"] <= seq]
    await store.write_batch(sid, epoch, evs, datetime.now(UTC))
    await store.release(sid, epoch)


async def test_only_sessions_with_something_new_are_warmed(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, "fake")
    await events(fake, "ses_caught_up", 3)
    await store_up_to(store, fake, "ses_caught_up", 3)
    await events(fake, "ses_behind", 5)
    await store_up_to(store, fake, "ses_behind", 2)
    await events(fake, "ses_new_with_events", 2)
    await events(fake, "ses_new_empty", 0)
    await events(fake, "ses_vanished", 2)
    await store_up_to(store, fake, "ses_vanished", 2)
    await fake.delete("ses_vanished")
    await events(fake, "ses_deleted_here", 2)
    await store.mark_deleted("ses_deleted_here")
    await events(fake, "ses_active", 1)
    await store_up_to(store, fake, "ses_active", 1)
    fake.active["ses_active"] = {"type": "running"}

    epoch, _ = await store.claim("ses_never_created", "test")  # subscribed to, never created upstream
    await store.release("ses_never_created", epoch)

    found = {c.session_id: c.reason for c in await sessions_to_warm(fake_client, store)}

    assert found == {
        "ses_behind": "new_events",
        "ses_new_with_events": "new_events",
        "ses_vanished": "gone_upstream",  # its follower records the deletion
        "ses_active": "active",
    }


async def test_a_session_whose_lease_is_held_is_not_even_probed(
    fake: FakeUpstream, fake_client: UpstreamClient, engine: AsyncEngine
) -> None:
    store = EventStore(engine, "fake")
    await events(fake, "ses_held", 5)
    await store_up_to(store, fake, "ses_held", 2)
    await store.claim("ses_held", "host-b:200:peer", lease_ttl_s=60)  # a peer follows it (or will be adopted)
    fake.active["ses_held"] = {"type": "running"}

    assert await sessions_to_warm(fake_client, store) == []
    assert fake.history_calls == 0
