"""A failover while prompts wait in the bridge's durable legacy queue, on the real `opencode serve` 1.18.33
(scripted mock model) and real streaming replication (tests/support/replication.py); docs/scaling.md,
"Failover", and docs/commands.md, "The legacy queue".

A legacy turn is held busy (a gated model reply); two prompts are queued behind it and replicated; the
standby is cut off and a third is queued: the product got its `queued` answer, but the row exists on the
primary only. The primary is SIGKILLed, the standby promoted, the turn released. Then:
- the two replicated prompts are delivered, in order, each exactly once (the model's request log);
- the third is gone with the primary, as documented: no row, never sent, nothing reached the model;
- the product's retry with the same `command_id` (what docs/commands.md tells it to do when the listing
  lacks a prompt it was told is queued) queues it again and it is delivered exactly once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bridge.store.embedded import DATABASE
from tests.e2e.test_commands import SECRET, UPSTREAM, Bridge, token
from tests.e2e.test_continuity import markers, model_requests, request_for
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.replication import ReplicatedPostgres
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

GATE = "failover-queue"


async def test_queued_legacy_prompts_cross_a_failover_once_and_an_unreplicated_one_is_retried_once(
        opencode: OpencodeServe, mock_llm: MockLLM, tmp_path: Path) -> None:
    pair = await asyncio.to_thread(ReplicatedPostgres.create)
    proc = BridgeProcess(tmp_path, opencode.base_url, pair.multi_host_url(), extra_env={
        "BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_SECRET": SECRET, "BRIDGE_PROMPT_RUNTIME": "auto",
        "BRIDGE_ALLOWED_DIRECTORIES": str(opencode.project_dir), "BRIDGE_RECONNECT_MIN_S": "0.05"})
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    bridge = Bridge(proc, http)
    try:
        proc.start()
        await proc.wait_ready(60)
        sid = await bridge.create(opencode)

        async def listed() -> dict[str, dict[str, Any]]:
            async with http.get(f"{proc.url}/v1/sessions/{sid}/commands",
                                headers={"Authorization": f"Bearer {token('read')}"}) as r:
                assert r.status == 200, await r.text()
                return {c["command_id"]: c for c in (await r.json())["data"]}

        status, busy = await bridge.prompt(sid, "fq-0", f"MOCK:gate:{GATE} MARKER-D busy", "steer")
        assert (status, busy["runtime"]) == (200, "legacy"), busy
        await mock_llm.wait_gate_reached(GATE, 60)  # the legacy turn is running, held by the model
        for n in (1, 2):
            status, queued = await bridge.prompt(sid, f"fq-{n}", f"MOCK:text MARKER-Q{n} queued", "queue")
            assert (status, queued["state"], queued["runtime"]) == (200, "queued", "legacy"), queued
        await asyncio.to_thread(pair.wait_replayed)
        await asyncio.to_thread(pair.detach_standby)  # from here on, commits exist on the primary only
        status, lost = await bridge.prompt(sid, "fq-3", "MOCK:text MARKER-Q3 queued", "queue")
        assert (status, lost["state"]) == (200, "queued"), lost

        await asyncio.to_thread(pair.kill_primary)
        survived = await asyncio.to_thread(
            pair.psql, pair.standby, "SELECT string_agg(command_id || '=' || state, ',' ORDER BY command_id) "
            f"FROM chat_commands WHERE session_id = '{sid}' AND command_id IN ('fq-1', 'fq-2', 'fq-3')", DATABASE)
        assert survived == "fq-1=queued,fq-2=queued", survived  # the third row is lost, really
        await asyncio.to_thread(pair.promote)
        mock_llm.release(GATE)

        # The replicated queue drains on the new primary, in order, each prompt once.
        q2 = await request_for(mock_llm, "MARKER-Q2")
        assert markers(q2) == ["MARKER-D", "MARKER-Q1", "MARKER-Q2"]
        await opencode.wait_legacy_idle(sid, 3, 90)
        rows = await wait_until(listed, 30, 0.2, ignore=(AssertionError, aiohttp.ClientError))
        assert {c: (rows[c]["state"], rows[c]["result"]["state"]) for c in ("fq-1", "fq-2")} == {
            "fq-1": ("done", "sent"), "fq-2": ("done", "sent")}, rows
        # The bound: the prompt queued on the lost primary only is gone, and was never sent.
        assert "fq-3" not in rows
        assert model_requests(mock_llm, "MARKER-Q3") == []

        # The product's retry with the same command_id puts it back, and it is delivered exactly once.
        async def retried() -> dict[str, Any] | None:
            status, body = await bridge.prompt(sid, "fq-3", "MOCK:text MARKER-Q3 queued", "queue")
            return body if status == 200 else None

        again = await wait_until(retried, 30, 0.5, ignore=(aiohttp.ClientError,))
        assert again["state"] in ("queued", "sent"), again
        q3 = await request_for(mock_llm, "MARKER-Q3")
        assert markers(q3) == ["MARKER-D", "MARKER-Q1", "MARKER-Q2", "MARKER-Q3"]
        await opencode.wait_legacy_idle(sid, 4, 90)
        for marker in ("MARKER-D", "MARKER-Q1", "MARKER-Q2", "MARKER-Q3"):
            starts = [r for r in model_requests(mock_llm, marker) if r.step == 0]
            assert len(starts) == 1, (marker, starts)
        users = [m for m in await opencode.legacy_messages(sid) if m["info"].get("role") == "user"]
        assert len(users) == 4  # one user message upstream per prompt: none lost, none twice
        assert proc.proc is not None and proc.proc.poll() is None  # it carried on, no restart
    finally:
        await http.close()
        proc.stop()
        await asyncio.to_thread(pair.destroy)
