"""A failover under the real `opencode serve` 1.18.33 (scripted mock model): the bridge process on a two-host
URL over a primary and a streaming standby (tests/support/replication.py) mirrors a v2 turn and a legacy
(`prompt_async`) turn; the standby is cut off, a second pair of turns lands on the primary only, the
primary is SIGKILLed and the standby promoted. The promoted standby is checked to lack the second turns;
then, the bridge not restarted, a third turn runs and every session's stored (seq, event_id) equals the
serve's sync log (legacy and v2 events), and every hash chain verifies (docs/scaling.md, "Failover")."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import pool
from sqlalchemy.ext.asyncio import create_async_engine

from bridge.store.db import to_async_url
from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.replication import ReplicatedPostgres
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "e2e-failover"


async def test_failover_mid_conversation_loses_nothing_on_the_real_serve(
        opencode: OpencodeServe, mock_llm: MockLLM, tmp_path: Path) -> None:
    pair = await asyncio.to_thread(ReplicatedPostgres.create)
    bridge = BridgeProcess(tmp_path, opencode.base_url, pair.multi_host_url(),
                           extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_RECONNECT_MIN_S": "0.05"})
    engine = create_async_engine(to_async_url(pair.multi_host_url()), poolclass=pool.NullPool)
    store = EventStore(engine, UPSTREAM)
    try:
        bridge.start()
        await bridge.wait_ready(60)
        v2, legacy = await opencode.create_session(), await opencode.create_session()

        async def log_of(sid: str) -> list[tuple[int, str]]:
            # from seq 0: `session.created` is stored too
            return [(int(e["seq"]), str(e["id"])) for e in await opencode.sync_log(sid)]

        async def mirrored() -> bool:
            for sid in (v2, legacy):
                if sid in await opencode.active() or await stored_ids(store, sid) != await log_of(sid):
                    return False
            return True

        async def turn(tag: str) -> None:
            await opencode.prompt(v2, f"MOCK:tool {tag} v2 turn")
            await opencode.prompt_async(legacy, f"MOCK:text {tag} legacy turn")
            await wait_until(mirrored, 90, 0.2, ignore=(OSError,), message=f"{tag} turns mirrored")

        await turn("first")
        await asyncio.to_thread(pair.wait_replayed)
        await asyncio.to_thread(pair.detach_standby)  # from here on, commits exist on the primary only
        await turn("second")
        on_primary = {sid: len(await stored_ids(store, sid)) for sid in (v2, legacy)}

        await asyncio.to_thread(pair.kill_primary)
        # The loss is real: read on the standby before its promotion (a hot standby reads; the bridge cannot
        # write to it yet, so its repair cannot race this check).
        standby = create_async_engine(to_async_url(pair.standby_url), poolclass=pool.NullPool)
        try:
            for sid in (v2, legacy):
                assert len(await stored_ids(EventStore(standby, UPSTREAM), sid)) < on_primary[sid]
        finally:
            await standby.dispose()
        await asyncio.to_thread(pair.promote)

        await turn("third")  # the bridge carried on, and re-read what the failover lost
        assert bridge.proc is not None and bridge.proc.poll() is None
        reader = AuditReader(engine, UPSTREAM)
        for sid in (v2, legacy):
            report = verify_chain(await reader.chain_rows(sid))
            assert report.ok, (sid, report.broken)
            assert report.events == len(await log_of(sid))
        # What the model saw: each of the six turns started exactly once (a step-0 call per user message).
        turns = [r for r in mock_llm.requests if r.step == 0 and r.directive != "title"]
        for tag in ("first", "second", "third"):
            for text in (f"{tag} v2 turn", f"{tag} legacy turn"):
                starts = [r for r in turns if text in r.user_text]
                assert len(starts) == 1, (text, starts)
    finally:
        bridge.stop()
        await engine.dispose()
        await asyncio.to_thread(pair.destroy)
