"""Session status and idle GC against the real `opencode serve` 1.18.33: a normal turn goes running →
idle; a model without credentials goes stalled within the stall timeout (docs/upstream.md §4); a turn cut by
an upstream restart ends interrupted (§7). An idle session is released after idle_ttl and warmed again by
the next prompt with nothing lost; a running turn is never released nor interrupted."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.e2e.lifecycle_helpers import lease_owner, log_events, session_row, status_of
from tests.e2e.test_mirror import reject_count, stored_types, wait_mirrored
from tests.support.bridge_proc import BridgeFactory
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

STALL_S = 4.0


async def test_status_running_then_idle_stalled_for_an_unavailable_model_and_interrupted_by_a_restart(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: BridgeFactory, db: AsyncEngine
) -> None:
    bridge = bridge_processes("bridge", BRIDGE_STALL_TIMEOUT_S=str(STALL_S))
    bridge.start()
    await bridge.wait_ready(60)
    normal, unavailable, cut = [await opencode.create_session() for _ in range(3)]

    await opencode.prompt(normal, "MOCK:text Say hello.")
    await opencode.wait_idle(normal, 60)
    await wait_until(lambda: status_of(db, normal), 30, 0.1, message="normal status stored")

    async def normal_went_idle() -> bool:
        seen = [r["status"] for r in log_events(bridge, "session_status", session_id=normal)]
        return "running" in seen and seen[-1] == "idle" and await status_of(db, normal) == "idle"

    await wait_until(normal_went_idle, 30, 0.1, message="normal turn: running → idle")

    # A model without a provider: the prompt is admitted and taken, then nothing (docs/upstream.md §4).
    await opencode.request("POST", f"/api/session/{unavailable}/model",
                           json_body={"model": {"providerID": "nope", "id": "nope"}}, expect=(200, 204))
    await opencode.prompt(unavailable, "Hello?")
    prompted_at = time.monotonic()
    await opencode.prompt(cut, "MOCK:gate:cut1:2 Start talking")
    await mock_llm.wait_gate_reached("cut1", timeout=60)
    await wait_until(lambda: stored_types(db, cut, "text:start"), 60, 0.1, message="text.started stored")

    async def stalled() -> bool:
        return await status_of(db, unavailable) == "stalled"

    await wait_until(stalled, STALL_S + 30, 0.1, message="unavailable model → stalled")
    print(f"\nstalled {time.monotonic() - prompted_at:.1f} s after the prompt (stall_timeout {STALL_S:g} s)")
    row = await session_row(db, unavailable)
    assert row is not None and "no step started" in row["status_reason"]
    assert await stored_types(db, unavailable, "step:start") == []  # nothing after prompted: silent failure

    await opencode.restart()  # SIGTERM mid-turn: the step stays open forever (docs/upstream.md §7)
    mock_llm.release("cut1")

    async def interrupted() -> bool:
        return await status_of(db, cut) == "interrupted"

    await wait_until(interrupted, 60, 0.1, message="turn cut by the upstream restart → interrupted")
    await wait_mirrored(db, opencode, normal, cut, timeout=60)
    await opencode.prompt(cut, "MOCK:text After the restart")
    await opencode.wait_idle(cut, 60)
    await wait_until(lambda: _is(db, cut, "idle"), 30, 0.1, message="the next turn ends idle")
    assert await reject_count(db) == 0


async def _is(db: AsyncEngine, sid: str, status: str) -> bool:
    return await status_of(db, sid) == status


async def test_idle_gc_releases_then_the_next_prompt_warms_again_and_a_running_turn_is_never_released(
    opencode: OpencodeServe, bridge_processes: BridgeFactory, db: AsyncEngine
) -> None:
    bridge = bridge_processes("bridge", BRIDGE_IDLE_TTL_S="3", BRIDGE_SWEEP_INTERVAL_S="1")
    bridge.start()
    await bridge.wait_ready(60)
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:text Say hello.")
    await opencode.wait_idle(sid, 60)
    await wait_mirrored(db, opencode, sid)

    async def released() -> bool:
        return bool(log_events(bridge, "session_idle_release", session_id=sid)) and await lease_owner(db, sid) is None

    await wait_until(released, 30, 0.1, message="released after idle_ttl")

    # A turn three times longer than idle_ttl, with no durable event while the text streams.
    owners: list[str | None] = []
    await opencode.prompt(sid, "MOCK:slow:18:0.5 Count slowly")
    await wait_until(lambda: lease_owner(db, sid), 30, 0.1, message="warmed again by the prompt")

    async def watch_owner() -> None:
        while True:
            owners.append(await lease_owner(db, sid))
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch_owner())
    try:
        history = await opencode.wait_idle(sid, 90)
    finally:
        watcher.cancel()
    assert None not in owners, "released during a running turn"
    assert [e["type"] for e in history if e["type"].startswith("session.next.step.")][-1] == "session.next.step.ended"
    assert history[-1]["data"].get("finish") == "stop"  # ran to its end: never interrupted
    assert log_events(bridge, "session_interrupt_requested") == []
    await wait_mirrored(db, opencode, sid)
    await wait_until(released, 30, 0.1, message="released again once idle")
    assert await reject_count(db) == 0
