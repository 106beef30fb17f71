"""BRIDGE_WORKERS=2 (docs/operations.md "Workers"), the real daemon against the fake upstream and a real
PostgreSQL: one parent, two workers on one port; `/global/event` read once for the host; the sessions leased
by the workers (each an ordinary replica); a worker SIGKILLed is started again by the parent and its sessions
adopted, nothing lost (stored == the upstream's log); `/metrics` adds the workers up (gauges of live workers,
counters of every worker that ever ran); SIGTERM of the parent stops every worker in order, leases handed off;
`/readyz` and `/livez` answer for the whole set whichever worker accepts the probe."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path

import aiohttp
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.writes import EventStore
from tests.support.bridge_proc import BridgeProcess
from tests.support.fake_upstream import FakeUpstream
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:workers"


async def burst(fake: FakeUpstream, sid: str, n: int, tag: str) -> None:
    for i in range(n):
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "a", "textID": f"{tag}{i}",
                                                            "text": f"{tag} part {i}"})


def upstream_ids(fake: FakeUpstream, sid: str) -> list[tuple[int, str]]:
    return [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]


def worker_pids(bridge: BridgeProcess) -> set[int]:
    assert bridge.proc is not None
    pid = bridge.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return {int(p) for p in fh.read().split()}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def metric(bridge: BridgeProcess, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(bridge.url + "/metrics") as r:
        body = await r.text()
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M))


async def owners(engine: AsyncEngine) -> dict[str, str | None]:
    async with engine.connect() as c:
        rows = await c.execute(text("select session_id, lease_owner from chat_sessions where upstream = :u"),
                               {"u": UPSTREAM})
        return {r.session_id: r.lease_owner for r in rows}


def owner_pid(owner: str | None) -> int:
    return int(owner.split(":")[1]) if owner else 0


async def test_two_workers_share_the_port_and_the_live_stream_and_a_killed_worker_loses_nothing(
        fake: FakeUpstream, database_url: str, engine: AsyncEngine, tmp_path: Path) -> None:
    sids = [f"ses_work{i}" for i in range(8)]
    for sid in sids:
        fake.add_session(sid)
        await burst(fake, sid, 3, "a")
    store = EventStore(engine, UPSTREAM)

    async def mirrored() -> bool:
        return all([await stored_ids(store, sid) == upstream_ids(fake, sid) for sid in sids])

    bridge = BridgeProcess(tmp_path, fake.url, database_url, extra_env={
        "BRIDGE_WORKERS": "2", "BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_RECONNECT_MIN_S": "0.05",
        "BRIDGE_LEASE_TTL_S": "3"})
    bridge.start()
    try:
        await bridge.wait_ready(60)
        # /readyz answers 200 once every worker is ready, as the parent's READY=1 (and its log line).
        await wait_until(lambda: '"workers_ready"' in bridge.log_path.read_text(), 60, 0.1, message="workers_ready")
        await wait_until(mirrored, 30, 0.05, message="every session mirrored")
        first = worker_pids(bridge)
        assert len(first) == 2
        started = [line for line in bridge.log_path.read_text().splitlines() if '"bridge_started"' in line]
        assert sorted(json.loads(line)["worker"] for line in started) == [0, 1]  # each worker's lines say which
        assert fake.global_subscribers == 1  # one /global/event for the host, whatever the number of workers
        held = await owners(engine)
        assert set(held) == set(sids) and {owner_pid(o) for o in held.values()} <= first
        await wait_until(lambda: summed(bridge, "bridge_sessions_warm", len(sids)), 15, 0.1,
                         message="warm sessions summed over the workers")

        # The worker holding the most sessions is SIGKILLed: the parent starts another, its sessions are adopted.
        victim = max(first, key=lambda pid: sum(owner_pid(o) == pid for o in held.values()))
        victims_sessions = [sid for sid, o in held.items() if owner_pid(o) == victim]
        assert victims_sessions
        ingested_before = await metric(bridge, "bridge_events_ingested_total")
        os.kill(victim, signal.SIGKILL)
        await asyncio.gather(*(burst(fake, sid, 5, "b") for sid in sids))
        await wait_until(lambda: _restarted(bridge, first, victim), 30, 0.05, message="the worker started again")
        await wait_until(lambda: bridge.log_path.read_text().count('"bridge_started"') == 3, 30, 0.1,
                         message="the new worker running")

        async def adopted() -> bool:
            return all(owner_pid(o) not in (0, victim) for o in (await owners(engine)).values())

        await wait_until(adopted, 30, 0.1, message=f"the sessions of {victim} adopted")
        await wait_until(mirrored, 30, 0.05, message="every session mirrored after the kill")
        await bridge.wait_ready()
        assert fake.global_subscribers == 1
        # Gauges: the live workers only (the dead one's file dropped); counters: every worker that ran.
        await wait_until(lambda: summed(bridge, "bridge_sessions_warm", len(sids)), 15, 0.1,
                         message="warm sessions summed over the live workers")
        assert await metric(bridge, "bridge_events_ingested_total") >= ingested_before
        assert "worker_died" in bridge.log_path.read_text()

        # SIGTERM: every worker stops in order (leases handed off: expired now), the parent exits 0.
        workers = worker_pids(bridge)
        assert bridge.proc is not None
        bridge.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(bridge.wait, 30) == 0, bridge.log_tail()
        assert not any(alive(pid) for pid in workers)
        async with engine.connect() as c:
            live_leases = (await c.execute(text(
                "select session_id, lease_owner, lease_expires_at, now() from chat_sessions where upstream = :u "
                "and lease_expires_at > now()"), {"u": UPSTREAM})).all()
        assert live_leases == []
        assert (await asyncio.to_thread(bridge.log_path.read_text)).count('"leases_handed_off"') >= 2
    finally:
        bridge.stop()


async def summed(bridge: BridgeProcess, name: str, expected: float) -> bool:
    return await metric(bridge, name) == expected


async def _restarted(bridge: BridgeProcess, first: set[int], victim: int) -> bool:
    now = worker_pids(bridge)
    return len(now) == 2 and victim not in now and bool(now - first)


async def test_a_worker_that_stops_feeding_its_watchdog_is_killed_and_started_again(
        fake: FakeUpstream, database_url: str, tmp_path: Path) -> None:
    # WATCHDOG_USEC as systemd sets it for the parent: a worker silent that long is wedged.
    bridge = BridgeProcess(tmp_path, fake.url, database_url, extra_env={
        "BRIDGE_WORKERS": "2", "BRIDGE_UPSTREAM_NAME": UPSTREAM, "WATCHDOG_USEC": "6000000"})
    bridge.start()
    try:
        await bridge.wait_ready(60)
        await wait_until(lambda: '"workers_ready"' in bridge.log_path.read_text(), 60, 0.1, message="workers_ready")
        first = worker_pids(bridge)
        stuck = min(first)
        os.kill(stuck, signal.SIGSTOP)  # alive, holding its pid, answering nothing
        await wait_until(lambda: _restarted(bridge, first, stuck), 30, 0.1, message="the stuck worker replaced")
        assert '"worker_wedged"' in bridge.log_path.read_text()
        assert not alive(stuck)
        await bridge.wait_ready()
    finally:
        bridge.stop()


async def test_a_worker_that_cannot_start_fails_the_start_of_the_set(tmp_path: Path, fake: FakeUpstream) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, "postgresql://bridge:pw@127.0.0.1:1/none", extra_env={
        "BRIDGE_WORKERS": "2", "BRIDGE_UPSTREAM_NAME": UPSTREAM})
    bridge.start()
    try:
        rc = await asyncio.to_thread(bridge.wait, 120)
        log = bridge.log_path.read_text()
        assert rc == 1, log[-3000:]
        assert '"worker_failed_to_start"' in log and '"bridge_crashed"' in log
        assert '"worker_died"' not in log  # not started again: a start that fails is the whole start failing
    finally:
        bridge.stop()


async def probe(bridge: BridgeProcess, route: str) -> tuple[int, dict[str, object]]:
    """One probe on a connection of its own (so any worker may accept it)."""
    async with aiohttp.ClientSession() as http, http.get(bridge.url + route) as r:
        return r.status, await r.json()


async def test_readyz_and_livez_answer_for_the_whole_set_from_either_worker(
        fake: FakeUpstream, database_url: str, tmp_path: Path) -> None:
    # WATCHDOG_USEC as systemd sets it: the parent's watch ticks every 3 s, its state is stale after 14 s.
    bridge = BridgeProcess(tmp_path, fake.url, database_url, extra_env={
        "BRIDGE_WORKERS": "2", "BRIDGE_UPSTREAM_NAME": UPSTREAM, "WATCHDOG_USEC": "6000000"})
    bridge.start()
    try:
        await bridge.wait_ready(60)
        assert '"workers_ready"' in bridge.log_path.read_text()  # /readyz 200 only once every worker is
        answered: dict[str, dict[str, object]] = {}

        async def both_answered(route: str, status: int) -> bool:
            code, body = await probe(bridge, route)
            if code == status:
                who = body["checks"]["workers"]["answered_by"] if route.startswith("/readyz") else body["answered_by"]
                answered[str(who)] = body
            return {"w0", "w1"} <= set(answered)

        await wait_until(lambda: both_answered("/readyz?verbose", 200), 30, 0.02, message="both workers ready")
        assert all(b["checks"]["workers"]["ready"] == "2/2" for b in answered.values())  # type: ignore[index]
        answered.clear()
        await wait_until(lambda: both_answered("/livez", 200), 30, 0.02, message="both workers alive")
        assert all(b["workers"] == "2/2 ready" for b in answered.values())

        # One worker SIGKILLed: the survivor says the set is not ready and which worker is missing.
        victim = max(worker_pids(bridge))
        index = next(json.loads(line)["worker"] for line in bridge.log_path.read_text().splitlines()
                     if '"worker_started"' in line and json.loads(line)["pid"] == victim)
        os.kill(victim, signal.SIGKILL)
        seen: list[dict[str, object]] = []

        async def says_not_ready() -> bool:
            code, body = await probe(bridge, "/readyz")
            if code == 503 and "workers" in body["checks"]:
                seen.append(body["checks"]["workers"])
            return bool(seen)

        await wait_until(says_not_ready, 30, 0.02, message="the set not ready")
        workers = seen[0]
        assert workers["ok"] is False and workers["ready"] == "1/2"
        assert set(workers["not_ready"]) == {f"w{index}"}  # type: ignore[arg-type]
        # livez stays 200 meanwhile: the parent restarts the worker, the set is alive
        assert (await probe(bridge, "/livez"))[0] == 200

        # Its successor ready: the set ready again, from either worker.
        answered.clear()
        await wait_until(lambda: both_answered("/readyz?verbose", 200), 60, 0.02, message="ready again from both")
        assert victim not in worker_pids(bridge)
        # /metrics: each worker's readiness and restarts, by index, from the set's state
        assert await metric(bridge, f'bridge_worker_restarts_total{{worker="{index}"}}') == 1
        assert await metric(bridge, "bridge_worker_restarts_total") == 1
        assert await metric(bridge, "bridge_worker_ready") == 2

        # The parent stopped (its loop no longer runs): both probes fail at whichever worker answers, then recover.
        assert bridge.proc is not None
        os.kill(bridge.proc.pid, signal.SIGSTOP)
        try:
            answered.clear()
            await wait_until(lambda: both_answered("/livez", 503), 30, 0.1, message="livez 503: the parent silent")
            assert all("has not written" in str(b["workers"]) for b in answered.values())
            assert (await probe(bridge, "/readyz"))[0] == 503
        finally:
            os.kill(bridge.proc.pid, signal.SIGCONT)
        await bridge.wait_ready(30)
        assert (await probe(bridge, "/livez"))[0] == 200
    finally:
        bridge.stop()
