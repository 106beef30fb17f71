"""Erasure against the real `opencode serve` 1.18.33 (docs/lifecycle.md, "Erasure"): a live, subscribed
session with a subagent is erased through `DELETE /v1/sessions/{id}/mirror`; its subscribers get the final
frame; the serve keeps talking in it; the bridge is killed with SIGKILL and a new one starts (discovery, a
fresh `/global/event`, catch-up from the sync log of every session it warms): not one row of the erased
sessions comes back, and the other session is mirrored whole (stored == its sync log)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.cli import _parser
from bridge.config import Settings
from bridge.lifecycle import cli as lifecycle_cli
from bridge.store.lifecycle.removal import SESSION_TABLES
from tests.support.bridge_proc import BridgeFactory, BridgeProcess
from tests.support.fanout_client import WsClient
from tests.support.opencode import OpencodeHTTPError, OpencodeServe
from tests.support.stored_rows import wait_synced

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e-erase"
SECRET = "e2e-erase-secret-" + "x" * 40


def token(scope: str = "read") -> str:
    return mint_token(SECRET, UPSTREAM, None, 600, "dpo", scope=scope)


def start(bridge_processes: BridgeFactory, name: str) -> BridgeProcess:
    proc = bridge_processes(name, BRIDGE_AUTH_SECRET=SECRET, BRIDGE_DISCOVERY_INTERVAL_S="1")
    proc.start()
    return proc


async def rows_of(db: AsyncEngine, *sessions: str) -> dict[str, int]:
    out = {}
    async with db.connect() as c:
        for table, where in SESSION_TABLES.items():
            q = text(f"SELECT count(*) FROM {table} WHERE upstream = :u AND {where}")
            out[table] = int((await c.execute(q.bindparams(u=UPSTREAM, ids=list(sessions)))).scalar_one())
    return out


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        yield s


async def test_an_erased_session_and_its_subagent_never_come_back_after_kill_9_and_restart(
    opencode: OpencodeServe, bridge_processes: BridgeFactory, db: AsyncEngine, http: aiohttp.ClientSession
) -> None:
    first = start(bridge_processes, "bridge-1")
    await first.wait_ready(60)
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:task delegate")
    await opencode.wait_legacy_idle(sid, 1)
    child = str((await opencode.request("GET", f"/session/{sid}/children"))[0]["id"])
    other = await opencode.create_session()
    await opencode.prompt_async(other, "MOCK:text kept")
    await opencode.wait_legacy_idle(other, 1)
    for s in (sid, child, other):
        await wait_synced(db, opencode, UPSTREAM, s)

    live = await WsClient.connect(first.url, token())
    try:
        for s in (sid, child):
            await live.subscribe(s)
            await live.wait_for("caught_up", session=s)
        async with http.delete(f"{first.url}/v1/sessions/{sid}/mirror",
                               headers={"Authorization": f"Bearer {token('control')}"},
                               json={"command_id": "erase-e2e", "reason": "the user closed the account"}) as r:
            body: dict[str, Any] = await r.json()
            assert r.status == 200, body
        assert sorted(body["sessions"]) == sorted([sid, child]) and body["rows"] > 0
        for s in (sid, child):
            await live.wait_for("erased", 20, session=s)
    finally:
        await live.close()
    assert await rows_of(db, sid, child) == dict.fromkeys(SESSION_TABLES, 0)
    other_rows = await rows_of(db, other)

    await opencode.prompt_async(sid, "MOCK:text still talking upstream")  # live events of the erased session
    await opencode.wait_legacy_idle(sid, 2)
    assert first.kill() == -9
    second = start(bridge_processes, "bridge-2")
    await second.wait_ready(60)
    await opencode.prompt_async(other, "MOCK:text after the restart")
    await opencode.prompt_async(sid, "MOCK:text and again")
    await opencode.wait_legacy_idle(other, 2)
    await opencode.wait_legacy_idle(sid, 3)
    await wait_synced(db, opencode, UPSTREAM, other)  # the new bridge mirrored what it should, from the sync log

    assert await rows_of(db, sid, child) == dict.fromkeys(SESSION_TABLES, 0)
    grown = await rows_of(db, other)
    assert grown["chat_session_events"] > other_rows["chat_session_events"]
    async with db.connect() as c:
        stones = (await c.execute(text("SELECT count(*) FROM chat_session_tombstones"))).scalar_one()
    assert stones == 2


async def test_the_cli_erases_with_upstream_and_the_serve_forgets_the_session(
    opencode: OpencodeServe, bridge_processes: BridgeFactory, db: AsyncEngine, database_url: str
) -> None:
    bridge = start(bridge_processes, "bridge-1")
    await bridge.wait_ready(60)
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:text to be forgotten")
    await opencode.wait_legacy_idle(sid, 1)
    await wait_synced(db, opencode, UPSTREAM, sid)

    settings = Settings(upstream_url=opencode.base_url, upstream_name=UPSTREAM)
    args = _parser().parse_args(["erase", "--session", sid, "--reason", "account closed", "--upstream"])
    out = io.StringIO()
    assert await asyncio.to_thread(lifecycle_cli.run, args, settings, database_url, out) == 0
    said = json.loads(out.getvalue())
    assert said["upstream_deleted"] is True and said["rows"] > 0
    with pytest.raises(OpencodeHTTPError) as gone:
        await opencode.get_session(sid)
    assert gone.value.status == 404
    assert await rows_of(db, sid) == dict.fromkeys(SESSION_TABLES, 0)
    again = io.StringIO()  # a second time: the mirror's erasure is a no-op, the serve has nothing to delete
    assert await asyncio.to_thread(lifecycle_cli.run, args, settings, database_url, again) == 0
    assert json.loads(again.getvalue())["upstream_deleted"] is False
