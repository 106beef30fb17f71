"""Many lease claims in one transaction on the real PostgreSQL (bridge.store.chat_sessions.claims): each
session's outcome is the one claim of its own would give, and two replicas claiming overlapping sets at once
take each session exactly once, without a deadlock (rows locked in session_id order)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.errors import LeaseHeld, LeaseLost
from bridge.lease import ClaimVerdict
from bridge.store.chat_sessions import Claim, ClaimAsk, LeaseStore
from bridge.store.db import make_engine
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, batch

UPSTREAM = "it-claims"
ME = "host-a:100:aaaa"
PEER = "host-b:200:bbbb"
DEAD = "host-c:300:cccc"


@pytest_asyncio.fixture
async def second_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = make_engine(database_url)  # another replica: a pool of its own
    try:
        yield eng
    finally:
        await eng.dispose()


async def test_each_session_of_a_batch_gets_what_its_own_claim_would(store: EventStore, engine: AsyncEngine) -> None:
    peer_epoch, _ = await store.claim("ses_held", PEER, lease_ttl_s=60)
    await store.claim("ses_expired", PEER, lease_ttl_s=60)
    await store.claim("ses_dead_holder", DEAD, lease_ttl_s=60)
    mine, _ = await store.claim("ses_ours", ME, "/old")
    await store.write_batch("ses_ours", mine, batch(1, 2, 3), RECEIVED_AT)
    await store.claim("ses_deleted", PEER)
    await store.mark_deleted("ses_deleted")
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE chat_sessions SET lease_expires_at = now() - interval '1 s', "
                                "status = 'waiting', status_reason = 'permission: bash' "
                                "WHERE session_id = 'ses_expired'"))

    names = ["ses_new", "ses_held", "ses_expired", "ses_dead_holder", "ses_ours", "ses_deleted"]
    got = await store.claim_many([ClaimAsk(sid, "/new" if sid != "ses_ours" else None) for sid in names], ME,
                                 lease_ttl_s=30, holder_dead=lambda owner: owner == DEAD)

    out = dict(zip(names, got, strict=True))
    assert out["ses_new"] == Claim(1, 0, ClaimVerdict.FREE, None, "idle", None)
    assert isinstance(out["ses_held"], LeaseHeld) and out["ses_held"].verdict is ClaimVerdict.HELD
    assert out["ses_expired"] == Claim(2, 0, ClaimVerdict.EXPIRED, PEER, "waiting", "permission: bash")
    assert out["ses_dead_holder"] == Claim(2, 0, ClaimVerdict.HOLDER_DEAD, DEAD, "idle", None)
    assert out["ses_ours"] == Claim(mine + 1, 3, ClaimVerdict.OURS, ME, "idle", None)  # supersedes our own
    assert isinstance(out["ses_deleted"], LeaseHeld) and out["ses_deleted"].verdict is ClaimVerdict.DELETED

    rows = {r.session_id: r for r in await store.sessions(include_deleted=True)}
    assert (rows["ses_held"].lease_owner, rows["ses_held"].lease_epoch) == (PEER, peer_epoch)  # untouched
    assert rows["ses_new"].directory == "/new" and rows["ses_expired"].directory == "/new"
    assert rows["ses_ours"].directory == "/old"  # a claim without a directory keeps the known one
    assert all(rows[s].lease_owner == ME for s in ("ses_new", "ses_expired", "ses_dead_holder", "ses_ours"))
    held = await LeaseStore(engine, UPSTREAM).heartbeat(ME, "host-a", 100, 30)  # the epochs the claims returned
    assert held == {s: c.epoch for s, c in out.items() if isinstance(c, Claim)}


async def test_a_write_with_the_epoch_a_batch_superseded_is_fenced(store: EventStore) -> None:
    old, _ = await store.claim("ses_A", ME)
    (new,) = await store.claim_many([ClaimAsk("ses_A")], ME)
    assert isinstance(new, Claim) and new.epoch == old + 1
    with pytest.raises(LeaseLost):
        await store.write_batch("ses_A", old, batch(1), RECEIVED_AT)
    assert (await store.write_batch("ses_A", new.epoch, batch(1), RECEIVED_AT)).inserted == 1


async def test_two_replicas_claiming_overlapping_sets_at_once_take_each_session_exactly_once(
    engine: AsyncEngine, second_engine: AsyncEngine
) -> None:
    a, b = EventStore(engine, UPSTREAM), EventStore(second_engine, UPSTREAM)
    sids = [f"ses_{k:04d}" for k in range(600)]
    for round_ in range(3):  # a fresh set each round: rows created by both at once, then rows that exist
        mine = [s + f"r{round_}" for s in sids[:400]]
        theirs = [s + f"r{round_}" for s in reversed(sids[200:])]  # overlap 200..399, asked in reverse order
        chunks_a = [mine[i:i + 200] for i in range(0, len(mine), 200)]
        chunks_b = [theirs[i:i + 200] for i in range(0, len(theirs), 200)]
        results = await asyncio.wait_for(asyncio.gather(
            *(a.claim_many([ClaimAsk(s) for s in c], "replica-a:1:a", lease_ttl_s=60) for c in chunks_a),
            *(b.claim_many([ClaimAsk(s) for s in c], "replica-b:2:b", lease_ttl_s=60) for c in chunks_b),
        ), 60)
        taken: dict[str, list[str]] = {}
        for owner, chunk, outcomes in zip(["a"] * len(chunks_a) + ["b"] * len(chunks_b), chunks_a + chunks_b,
                                          results, strict=True):
            for sid, outcome in zip(chunk, outcomes, strict=True):
                if isinstance(outcome, Claim):
                    assert outcome.epoch == 1
                    taken.setdefault(sid, []).append(owner)
                else:
                    assert isinstance(outcome, LeaseHeld) and outcome.verdict is ClaimVerdict.HELD
        assert sorted(taken) == sorted(set(mine) | set(theirs))
        assert all(len(owners) == 1 for owners in taken.values())
        rows = {r.session_id: r for r in await a.sessions()}
        assert all(rows[s].lease_owner == f"replica-{owners[0]}:{1 if owners[0] == 'a' else 2}:{owners[0]}"
                   for s, owners in taken.items())
