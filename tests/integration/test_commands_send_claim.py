"""The send claim of a legacy prompt row on the real PostgreSQL (docs/commands.md, "Exactly once", "The
send claim"): a holder inside its `prompt_async` keeps the row even when every bridge connection to the
database is terminated (the soak's fault that let a second replica send a prompt again while an advisory
lock held it); a dead holder's claim ages out and the next sender sends once; a holder whose claim was taken
over sends nothing; and a retry whose row was lost finds its first attempt upstream by the command's digest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.rows import DoorStore
from bridge.commands.legacy_delivery import CLAIM_WINDOW_S, SENDING, ClaimAction
from bridge.commands.model import upstream_message_id
from bridge.commands.ratelimit import RateLimiter
from bridge.errors import UpstreamUnavailable
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.store.commands_pending import CommandKey, PromptQueueStore
from bridge.store.db import make_engine
from tests.support.commands_twin import DIR, SID, UpstreamCommandsTwin

from .test_commands_http import SECRET, UPSTREAM, auth

STEER = {"command_id": "s-1", "text": "hello", "delivery": "steer"}
KEY = CommandKey("alice", SID, "s-1")


class Replica:
    def __init__(self, engine: AsyncEngine, twin: UpstreamCommandsTwin) -> None:
        self.service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]
                                      DoorSettings(exit_after_upstream="", directories=("/srv/agent",),
                                                   prompt_runtime="legacy"),
                                      limiter=RateLimiter(rate_per_s=100, burst=100),
                                      queue=PromptQueueStore(engine, UPSTREAM))
        self.queue: PromptQueueStore = self.service.prompts.queue
        self.claims = 0
        claim = self.queue.claim

        async def counted(key: CommandKey, token: str) -> tuple[ClaimAction, Any]:
            self.claims += 1
            return await claim(key, token)

        self.queue.claim = counted  # type: ignore[method-assign]


@pytest.fixture
async def replicas(engine: AsyncEngine, database_url: str) -> AsyncIterator[tuple[Any, Any, Replica, Replica,
                                                                                   UpstreamCommandsTwin]]:
    twin = UpstreamCommandsTwin()
    other = make_engine(database_url)
    a, b = Replica(engine, twin), Replica(other, twin)
    clients = []
    for r in (a, b):
        app = web.Application()
        add_command_routes(app, CommandsContext(r.service, SECRET))
        clients.append(TestClient(TestServer(app)))
    async with clients[0] as ha, clients[1] as hb:
        yield ha, hb, a, b, twin
    await other.dispose()


async def terminate_every_other_connection(engine: AsyncEngine) -> int:
    """The soak's `drop_db` fault: every other backend of this database is terminated."""
    async with engine.connect() as conn:
        n = (await conn.execute(text(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"))).scalar_one()
        await conn.commit()
    return int(n)


async def row_state(engine: AsyncEngine) -> tuple[str, str | None, float | None]:
    async with engine.connect() as conn:
        r = (await conn.execute(text(
            "SELECT state, send_token, extract(epoch FROM now() - send_claimed_at) FROM chat_commands "
            "WHERE command_id = 's-1'"))).one()
    return r[0], r[1], None if r[2] is None else float(r[2])


async def test_a_holder_inside_its_send_keeps_the_row_when_every_connection_is_terminated(
        engine: AsyncEngine, database_url: str,
        replicas: tuple[Any, Any, Replica, Replica, UpstreamCommandsTwin]) -> None:
    ha, hb, _, b, twin = replicas
    inside, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        inside.set()
        await release.wait()

    twin.in_legacy_send = hold
    first = asyncio.create_task(ha.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth()))
    await asyncio.wait_for(inside.wait(), 10)
    killer = make_engine(database_url)
    try:
        assert await terminate_every_other_connection(killer) >= 1
    finally:
        await killer.dispose()
    # the other replica's queue sender finds the row `sending`, claimed a moment ago: it sends nothing
    body = {"messageID": upstream_message_id(UPSTREAM, SID, "s-1", 0, "alice"), "parts": []}
    with pytest.raises(UpstreamUnavailable, match="another sender"):
        await b.service.prompts.legacy_sender.deliver(KEY, SID, DIR, body, {}, wait_held=False)
    # a client retry on the other replica waits for the holder instead of sending
    claims = b.claims
    retry = asyncio.create_task(hb.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth()))

    async def retry_found_it_held() -> bool:
        return b.claims >= claims + 2

    deadline = asyncio.get_running_loop().time() + 10
    while not await retry_found_it_held():
        assert asyncio.get_running_loop().time() < deadline, "the retry never tried to claim the row"
        await asyncio.sleep(0.05)
    assert twin.count("legacy_prompt") == 1 and not retry.done()
    release.set()
    r1, r2 = await first, await retry
    assert r1.status == r2.status == 200
    a1, a2 = await r1.json(), await r2.json()
    assert a1 == a2 and a1["state"] == "sent"
    assert twin.count("legacy_prompt") == 1
    assert [len(m["parts"]) for m in twin.legacy_users[SID]] == [1]  # one message, one text part
    assert (await row_state(engine))[0] == "done"


async def age_the_claim(engine: AsyncEngine, seconds: float) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE chat_commands SET send_claimed_at = now() - make_interval(secs => :s) "
                                "WHERE command_id = 's-1'"), {"s": seconds})


async def test_a_dead_holders_claim_ages_out_and_the_next_sender_looks_then_sends_once(
        engine: AsyncEngine, replicas: tuple[Any, Any, Replica, Replica, UpstreamCommandsTwin]) -> None:
    ha, _, _, b, twin = replicas

    async def lost() -> None:  # the serve went away inside the send: nothing stored, outcome unknown
        raise UpstreamUnavailable("connection reset")

    twin.in_legacy_send = lost
    assert (await ha.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth())).status == 503
    twin.in_legacy_send = None
    state, token, age = await row_state(engine)
    assert state == SENDING and token is not None and age is not None and age < CLAIM_WINDOW_S
    body = {"messageID": (await b.queue.row(KEY)).upstream_id, "parts": [{"type": "text", "text": "hello"}]}  # type: ignore[union-attr]
    with pytest.raises(UpstreamUnavailable, match="another sender"):  # its holder may still be sending
        await b.service.prompts.legacy_sender.deliver(KEY, SID, DIR, body, {}, wait_held=False)
    await age_the_claim(engine, CLAIM_WINDOW_S + 1)
    status, answer = await b.service.prompts.legacy_sender.deliver(KEY, SID, DIR, body, {}, wait_held=False)
    assert (status, answer["state"]) == (200, "sent")
    assert twin.count("legacy_prompt") == 2  # the lost attempt (nothing stored) and this one
    assert len(twin.legacy_users[SID]) == 1
    again = await ha.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth())
    assert again.status == 200 and (await again.json())["state"] == "sent" and twin.count("legacy_prompt") == 2


async def test_an_aged_claim_whose_message_is_upstream_is_only_recorded(
        engine: AsyncEngine, replicas: tuple[Any, Any, Replica, Replica, UpstreamCommandsTwin]) -> None:
    """The holder's send did reach the serve, then the holder died before its commit."""
    ha, _, _, b, twin = replicas
    stored = False

    async def dies_after_the_serve_took_it() -> None:
        nonlocal stored
        stored = True

    twin.in_legacy_send = dies_after_the_serve_took_it
    first = await ha.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth())
    assert first.status == 200 and stored
    async with engine.begin() as conn:  # as if the commit of `done` never happened
        await conn.execute(text("UPDATE chat_commands SET state = 'sending', http_status = NULL, result = NULL "
                                "WHERE command_id = 's-1'"))
    await age_the_claim(engine, CLAIM_WINDOW_S + 1)
    row = await b.queue.row(KEY)
    assert row is not None and row.upstream_id is not None
    body = {"messageID": row.upstream_id, "parts": [{"type": "text", "text": "hello"}]}
    status, answer = await b.service.prompts.legacy_sender.deliver(KEY, SID, DIR, body, {}, wait_held=False)
    assert (status, answer["state"], answer["message_id"]) == (200, "sent", row.upstream_id)
    assert twin.count("legacy_prompt") == 1


async def test_a_holder_whose_claim_was_taken_over_cannot_renew_it(
        engine: AsyncEngine, replicas: tuple[Any, Any, Replica, Replica, UpstreamCommandsTwin]) -> None:
    ha, _, a, b, twin = replicas
    twin.in_legacy_send = lambda: asyncio.sleep(0)
    assert (await ha.post(f"/v1/sessions/{SID}/prompt", json={**STEER, "delivery": "queue"},
                          headers=auth())).status == 200
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE chat_commands SET state = 'queued' WHERE command_id = 's-1'"))
    assert (await a.queue.claim(KEY, "slow"))[0] is ClaimAction.TAKE
    assert await a.queue.renew(KEY, "slow")  # still its own: renewed
    assert (await b.queue.claim(KEY, "other"))[0] is ClaimAction.HELD
    await age_the_claim(engine, CLAIM_WINDOW_S + 1)
    assert (await b.queue.claim(KEY, "other"))[0] is ClaimAction.TAKE
    assert not await a.queue.renew(KEY, "slow")  # the fence: "slow" sends nothing now
    assert await b.queue.renew(KEY, "other")
    assert (await row_state(engine))[1] == "other"


async def test_a_retry_whose_row_was_lost_finds_its_first_attempt_upstream_by_the_digest(
        engine: AsyncEngine, replicas: tuple[Any, Any, Replica, Replica, UpstreamCommandsTwin]) -> None:
    """The row lost with a failover and the mirror not repaired yet: the new row gets a new time-stamped id,
    and the first attempt's message (same digest) among the session's newest messages stops the resend."""
    ha, _, _, _, twin = replicas
    first_id = upstream_message_id(UPSTREAM, SID, "s-1", 1796005680438, "alice")
    twin.legacy_users[SID] = [{"info": {"id": first_id, "role": "user"}, "parts": [{"type": "text"}]}]
    r = await ha.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth())
    assert r.status == 200
    answer = await r.json()
    assert (answer["state"], answer["message_id"]) == ("sent", first_id)
    assert twin.count("legacy_prompt") == 0
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT upstream_id FROM chat_commands WHERE command_id = 's-1'"))
                ).scalar() == first_id


async def test_an_attempt_that_sent_nothing_lets_its_claim_go_at_once(
        engine: AsyncEngine, replicas: tuple[Any, Any, Replica, Replica, UpstreamCommandsTwin]) -> None:
    """The serve away during the look before the send: nothing was sent, so the next attempt need not wait
    the claim out."""
    ha, hb, _, b, twin = replicas
    twin.fail_prompt = UpstreamUnavailable("connection refused")
    assert (await ha.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth())).status == 503
    assert twin.count("legacy_prompt") == 0
    state, token, _ = await row_state(engine)
    assert (state, token) == (SENDING, None)
    twin.fail_prompt = None
    claims = b.claims
    again = await hb.post(f"/v1/sessions/{SID}/prompt", json=STEER, headers=auth())
    assert again.status == 200 and (await again.json())["state"] == "sent"
    assert b.claims == claims + 1  # taken at the first try, not waited for
    assert twin.count("legacy_prompt") == 1
