"""Complete mirror on the real `opencode serve` 1.18.33 (docs/mirror.md, "One cursor, two sources"): turns
driven by OpenCode's own CLI, by legacy `prompt_async` and by the v2 API end with the stored (seq, event_id)
list equal to the session's sync log from seq 0 (`POST /sync/history {}`) exactly, and no unrepaired gap; also
after a SIGKILL of the bridge in the middle of a legacy turn, and after a `/global/event` connection is cut
mid-turn (a loopback proxy between bridge and serve)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.writes import EventStore
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.stored_rows import stored_ids, wait_synced
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e"



async def running(make: Callable[..., BridgeProcess], *args: Any, **kwargs: Any) -> BridgeProcess:
    """A bridge process started and ready."""
    bridge = make(*args, **kwargs)
    bridge.start()
    await bridge.wait_ready()
    return bridge


async def wait_mirrored(db: AsyncEngine, serve: OpencodeServe, sid: str) -> None:
    """The session is stored exactly as its sync log (wait_synced), with no gap, nothing incomplete, no reject."""
    await wait_synced(db, serve, UPSTREAM, sid)
    await assert_complete(db, sid)


async def wait_some_stored(db: AsyncEngine, sid: str) -> None:
    """Part of the turn (3 events) is stored."""
    store = EventStore(db, UPSTREAM)

    async def some_stored() -> bool:
        return len(await stored_ids(store, sid)) >= 3
    await wait_until(some_stored, 60, 0.1, message="part of the legacy turn stored")


async def sync_reads(bridge: BridgeProcess, repairs_prefix: str) -> tuple[float, float]:
    """From the bridge's /metrics: (sync-log repairs counted under `repairs_prefix`, events stored from twins)."""
    text_ = await bridge_metrics(bridge)
    return metric_sum(text_, repairs_prefix), metric_sum(text_, "bridge_twin_events_total")


async def assert_complete(db: AsyncEngine, *sessions: str) -> None:
    async with db.connect() as c:
        gaps = (await c.execute(text("select count(*) from chat_session_gaps where session_id = any(:s)"),
                                {"s": list(sessions)})).scalar_one()
        incomplete = (await c.execute(text("select count(*) from chat_sessions where incomplete and "
                                           "session_id = any(:s)"), {"s": list(sessions)})).scalar_one()
        rejects = (await c.execute(text("select count(*) from chat_event_rejects"))).scalar_one()
    assert (gaps, incomplete, rejects) == (0, 0, 0)


async def kinds(db: AsyncEngine, sid: str) -> list[str]:
    async with db.connect() as c:
        rows = await c.execute(text("select kind from chat_session_events where session_id = :s order by seq"),
                               {"s": sid})
        return [r.kind for r in rows]


async def legacy_lag_ms(db: AsyncEngine, sid: str) -> list[float]:
    """Upstream → commit of legacy part updates: `data.time` (epoch ms of the update) to `stored_at`."""
    async with db.connect() as c:
        rows = await c.execute(text(
            "select extract(epoch from stored_at) * 1000 - (payload->'data'->>'time')::float8 as ms "
            "from chat_session_events where session_id = :s and type = 'message.part.updated' "
            "and jsonb_typeof(payload->'data'->'time') = 'number' order by ms"), {"s": sid})
        return [float(r.ms) for r in rows]


async def test_a_turn_of_the_real_cli_is_mirrored_exactly(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    await running(bridge_processes)
    sid = await opencode.create_session()
    await opencode.run_cli(sid, "MOCK:tool Run echo")
    await wait_mirrored(db, opencode, sid)
    log = await opencode.sync_history(sid, 0)
    assert not [i for i in log if i["type"].startswith("session.next.")]  # the CLI drives the legacy API
    got = await kinds(db, sid)
    assert {"prompt:admitted", "step:start", "tool:start", "tool:success", "text:end", "step:end"} <= set(got)
    lags = await legacy_lag_ms(db, sid)
    print(f"\nCLI tool turn: {len(log)} legacy events; lag upstream→commit of part updates "
          f"median {lags[len(lags) // 2]:.0f} ms, max {lags[-1]:.0f} ms")


async def test_a_session_mixing_a_legacy_prompt_async_turn_and_a_v2_turn_is_mirrored_exactly(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    await running(bridge_processes)
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:text Say hello.")
    await opencode.wait_legacy_idle(sid, 1)
    await opencode.prompt(sid, "MOCK:text Say hello again.")
    await opencode.wait_idle(sid, 60)
    await wait_mirrored(db, opencode, sid)
    log = await opencode.sync_history(sid, 0)
    v2 = [i for i in log if i["type"].startswith("session.next.")]
    assert v2 and len(v2) < len(log)
    assert (await kinds(db, sid)).count("text:end") == 2  # one per turn, whichever runtime drove it


async def test_a_v2_only_tool_turn_equals_the_sync_log(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    await running(bridge_processes)
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:tool Run echo")
    history = await opencode.wait_idle(sid, 60)
    await wait_mirrored(db, opencode, sid)
    log = await opencode.sync_history(sid, 0)
    assert [(i["seq"], i["id"]) for i in log] == [(e["durable"]["seq"], e["id"]) for e in history]


async def test_sigkill_of_the_bridge_in_the_middle_of_a_legacy_turn_then_restart(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    first = await running(bridge_processes, "first")
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:gate:g1:2 Wait")
    # The model holds the turn (so the next prompt is a turn of its own, not folded into this one by a
    # loop that had not started yet), and part of it is stored.
    await mock_llm.wait_gate_reached("g1", timeout=60)
    await wait_some_stored(db, sid)
    first.kill()
    mock_llm.release("g1")
    await opencode.prompt_async(sid, "MOCK:text And again.")  # a whole turn while no bridge runs
    await opencode.wait_legacy_idle(sid, 2)
    await running(bridge_processes, "second")
    await wait_mirrored(db, opencode, sid)


async def test_a_global_event_cut_mid_turn_is_repaired(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    host, port = opencode.base_url.removeprefix("http://").split(":")
    proxy = TcpProxy(host, int(port))
    await proxy.start()
    try:
        bridge = await running(bridge_processes, upstream_url=proxy.url)
        await wait_until(lambda: proxy.open_matching(b"GET /global/event") == 1, 20, 0.05,
                         message="/global/event through the proxy")
        sid = await opencode.create_session()
        await opencode.prompt_async(sid, "MOCK:gate:g2:2 Wait")
        await mock_llm.wait_gate_reached("g2", timeout=60)  # the turn is running, held by the model
        await wait_some_stored(db, sid)
        assert proxy.cut(b"GET /global/event") == 1
        mock_llm.release("g2")  # the rest of the turn happens around the cut
        await opencode.wait_legacy_idle(sid, 1)
        await wait_mirrored(db, opencode, sid)
        await wait_until(lambda: proxy.open_matching(b"GET /global/event") == 1, 20, 0.05,
                         message="/global/event reconnected")
        repairs, twins = await sync_reads(bridge, 'bridge_sync_repairs_total{cause="live_reconnect"}')
        log = await opencode.sync_history(sid, 0)
        print(f"\n/global/event cut mid legacy turn: {len(log)} events, {twins:.0f} from twins, "
              f"{repairs:.0f} sync-log read(s) after the reconnect")
        assert repairs >= 1
    finally:
        await proxy.stop()


async def test_repairs_after_a_reconnect_are_few(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], db: AsyncEngine
) -> None:
    """Numbers for the report: sync-log reads per legacy turn and after one reconnect (from /metrics)."""
    bridge = await running(bridge_processes)
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:tool Run echo")
    await opencode.wait_legacy_idle(sid, 1)
    await wait_synced(db, opencode, UPSTREAM, sid)
    repairs, twins = await sync_reads(bridge, "bridge_sync_repairs_total{")
    log = await opencode.sync_history(sid, 0)
    print(f"\nlegacy tool turn: {len(log)} events, {twins:.0f} stored from twins, {repairs:.0f} sync-log reads")
    assert twins > 0 and repairs <= 6


def metric_sum(metrics_text: str, prefix: str) -> float:
    """The sum of the samples whose line starts with `prefix` (labels included or not)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
               if line.startswith(prefix) and not line.startswith("#"))


async def bridge_metrics(bridge: BridgeProcess) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as s, s.get(f"{bridge.url}/metrics") as r:
        return await r.text()


