"""The mirror against the real `opencode serve` 1.18.33: the stored (seq, event_id) set of every session
equals the upstream's own `/history`, on normal turns and after real faults (SIGKILL of the bridge
mid-turn, restart of the serve mid-turn). The bridge runs as a real child process (`python -m bridge run`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.writes import EventStore
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import HELLO_TEXT, MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e"





def upstream_ids(history: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(int(e["durable"]["seq"]), str(e["id"])) for e in history]


async def wait_mirrored(db: AsyncEngine, serve: OpencodeServe, *sessions: str, timeout: float = 30) -> None:
    """Every session's stored (seq, event_id) list equals its `session.created` (seq 0, a legacy event, never
    on /history: docs/mirror.md "Seq 0") followed by the upstream /history, in order, no extras."""
    store = EventStore(db, UPSTREAM)
    state: dict[str, Any] = {}

    async def same() -> bool:
        for sid in sessions:
            stored = await stored_ids(store, sid)
            upstream = upstream_ids(await serve.history(sid))
            state[sid] = (len(stored), len(upstream))
            if not stored or stored[0][0] != 0 or stored[1:] != upstream or not upstream:
                return False
        return True

    await wait_until(same, timeout, 0.2, message=f"stored == /history for {sessions} (stored, upstream): {state}")


async def stored_types(db: AsyncEngine, sid: str, kind: str | None = None) -> list[str]:
    async with db.connect() as c:
        rows = await c.execute(text("select type, kind from chat_session_events where upstream = :u and "
                                    "session_id = :s order by seq"), {"u": UPSTREAM, "s": sid})
        return [r.type for r in rows if kind is None or r.kind == kind]


async def reject_count(db: AsyncEngine) -> int:
    async with db.connect() as c:
        return int((await c.execute(text("select count(*) from chat_event_rejects"))).scalar_one())


async def test_text_and_tool_turns_in_two_sessions_at_once_are_mirrored_exactly(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    bridge = bridge_processes()
    bridge.start()
    await bridge.wait_ready()
    a = await opencode.create_session()
    b = await opencode.create_session()
    await asyncio.gather(opencode.prompt(a, "MOCK:text Say hello."), opencode.prompt(b, "MOCK:tool Run echo"))
    await asyncio.gather(opencode.wait_idle(a, 60), opencode.wait_idle(b, 60))
    await wait_mirrored(db, opencode, a, b)

    async with db.connect() as c:
        ended = (await c.execute(text("select payload->'data'->>'text' from chat_session_events where "
                                      "session_id = :s and kind = 'text:end'"), {"s": a})).scalar_one()
        tools = (await c.execute(text("select tool_name from chat_session_events where session_id = :s and "
                                      "kind = 'tool:start' order by seq"), {"s": b})).scalars().all()
        lags = (await c.execute(text("select type, extract(epoch from stored_at - event_time) * 1000 as ms, "
                                     "extract(epoch from stored_at - received_at) * 1000 as own "
                                     "from chat_session_events where session_id in (:a, :b) order by ms"),
                                {"a": a, "b": b})).all()
    assert ended == HELLO_TEXT
    assert tools == ["bash", "read"]  # tool:start comes from tool.called, once per call
    assert "session.next.tool.input.started" in await stored_types(db, b)
    assert await reject_count(db) == 0
    # For the record (not a timed assertion): upstream event timestamp -> our commit, per event.
    # `prompted` carries the prompt's creation time, not its commit time, so its lag looks larger.
    ms = [float(r.ms) for r in lags]
    own = sorted(float(r.own) for r in lags)
    print(f"\nupstream timestamp -> our commit over {len(ms)} events: p50 {ms[len(ms) // 2]:.1f} ms, "
          f"max {ms[-1]:.1f} ms ({lags[-1].type}); read -> commit: p50 {own[len(own) // 2]:.1f} ms, "
          f"max {own[-1]:.1f} ms")


async def test_sigkill_of_the_bridge_mid_turn_loses_and_duplicates_nothing(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    bridge = bridge_processes("bridge-1")
    bridge.start()
    await bridge.wait_ready()
    a = await opencode.create_session()
    b = await opencode.create_session()
    await opencode.prompt(a, "MOCK:gate:kill1:2 Start talking")
    await opencode.prompt(b, "MOCK:tool Run echo")
    await mock_llm.wait_gate_reached("kill1", timeout=30)
    # The turn is open upstream and the bridge has already stored part of it: now kill it mid-turn.
    await wait_until(lambda: stored_types(db, a, "text:start"), 30, 0.1, message="text.started stored")
    assert bridge.kill() == -9
    mock_llm.release("kill1")
    await opencode.prompt(b, "MOCK:text And again")  # whole turns happen while the bridge is dead
    await asyncio.gather(opencode.wait_idle(a, 60), opencode.wait_idle(b, 60))

    again = bridge_processes("bridge-2")
    again.start()
    await again.wait_ready()
    await wait_mirrored(db, opencode, a, b)
    await opencode.prompt(a, "MOCK:text After the restart")
    await opencode.wait_idle(a, 60)
    await wait_mirrored(db, opencode, a, b)
    assert await reject_count(db) == 0


async def test_upstream_restart_mid_turn_loses_and_duplicates_nothing(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    bridge = bridge_processes()
    bridge.start()
    await bridge.wait_ready()
    a = await opencode.create_session()
    await opencode.prompt(a, "MOCK:gate:restart1:2 Start talking")
    await mock_llm.wait_gate_reached("restart1", timeout=30)
    await wait_until(lambda: stored_types(db, a, "text:start"), 30, 0.1, message="text.started stored")
    await opencode.restart()  # SIGTERM mid-turn; the turn is left open forever (docs/upstream.md §7)
    mock_llm.release("restart1")
    await wait_mirrored(db, opencode, a)
    await opencode.prompt(a, "MOCK:text After the upstream restart")
    await opencode.wait_idle(a, 60)
    await wait_mirrored(db, opencode, a)
    assert await reject_count(db) == 0
    assert bridge.proc is not None and bridge.proc.poll() is None
