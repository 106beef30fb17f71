"""BRIDGE_WORKERS=2 on the real opencode serve 1.18.33 (docs/operations.md "Workers"): the parent speaks for
the set to systemd (READY=1 once both workers are, WATCHDOG=1, STOPPING=1 last); a worker holding a session in
the middle of a turn is SIGKILLed; the parent starts another, the session is adopted, the turn ends, and what
is stored equals the serve's history; SIGTERM of the parent gives every lease back and exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.e2e.test_mirror import UPSTREAM, wait_mirrored
from tests.e2e.test_ops_service import Datagrams, bridges, notify_socket  # noqa: F401 - fixtures
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


def worker_pids(bridge: BridgeProcess) -> set[int]:
    assert bridge.proc is not None
    with open(f"/proc/{bridge.proc.pid}/task/{bridge.proc.pid}/children") as fh:
        return {int(p) for p in fh.read().split()}


async def holder_pid(db: AsyncEngine, sid: str) -> int:
    async with db.connect() as c:
        owner = (await c.execute(text("select lease_owner from chat_sessions where session_id = :s"),
                                 {"s": sid})).scalar_one_or_none()
    return int(owner.split(":")[1]) if owner else 0


async def victim_holds_none(db: AsyncEngine, pid: int) -> bool:
    async with db.connect() as c:
        owners = (await c.execute(text("select lease_owner from chat_sessions where lease_owner is not null and "
                                       "lease_expires_at > now()"))).scalars().all()
    return all(int(o.split(":")[1]) != pid for o in owners)


async def test_a_worker_killed_mid_turn_is_replaced_and_the_mirror_equals_the_serve(
    tmp_path: Path, opencode: OpencodeServe, mock_llm: MockLLM, database_url: str, db: AsyncEngine,
    notify_socket: tuple[str, socket.socket], bridges: list[BridgeProcess],  # noqa: F811
) -> None:
    path, sock = notify_socket
    dgrams = Datagrams(sock)
    # Read as they come: the kernel queues few datagrams (net.unix.max_dgram_qlen), the rest would be dropped.
    loop = asyncio.get_running_loop()
    loop.add_reader(sock.fileno(), dgrams.drain)
    bridge = BridgeProcess(tmp_path, opencode.base_url, database_url, extra_env={
        "BRIDGE_WORKERS": "2", "BRIDGE_UPSTREAM_NAME": UPSTREAM, "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "10000000",
        "BRIDGE_LEASE_TTL_S": "6"})
    bridges.append(bridge)
    bridge.start()
    await wait_until(lambda: "READY=1" in dgrams.first_fields(), 60, 0.05, message="READY=1 from the parent")
    await bridge.wait_ready()
    first = worker_pids(bridge)
    assert len(first) == 2

    quiet = await opencode.create_session()
    await opencode.prompt(quiet, "MOCK:text Say hello.")
    await opencode.wait_idle(quiet, 60)
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:gate:wk1:3 Start talking")
    await mock_llm.wait_gate_reached("wk1", timeout=30)
    await wait_until(lambda: holder_pid(db, sid), 30, 0.1, message=f"{sid} leased")
    victim = await holder_pid(db, sid)
    assert victim in first

    os.kill(victim, signal.SIGKILL)
    mock_llm.release("wk1")
    await opencode.wait_idle(sid, 60)

    async def replaced() -> bool:
        now = worker_pids(bridge)
        return len(now) == 2 and victim not in now

    await wait_until(replaced, 30, 0.1, message="the parent started another worker")

    async def adopted() -> bool:
        return (await holder_pid(db, sid)) not in (0, victim)

    await wait_until(adopted, 30, 0.1, message=f"{sid} adopted")
    # Every session of the killed worker (`quiet` too, when its home was the victim: bridge.lease.claim_delay)
    # is adopted by the sweep of a live worker, or its lease expires: none is left held by the dead pid.
    await wait_until(lambda: victim_holds_none(db, victim), 30, 0.1, message="no lease left to the killed worker")
    await wait_mirrored(db, opencode, sid, quiet, timeout=60)

    assert bridge.proc is not None
    bridge.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(bridge.wait, 30) == 0, bridge.log_tail()
    loop.remove_reader(sock.fileno())
    fields = dgrams.first_fields()
    # STATUS= says how many workers are up while they start; the watchdog runs between READY and STOPPING.
    assert fields[-1] == "STOPPING=1" and fields.index("READY=1") < fields.index("WATCHDOG=1")
    assert "WATCHDOG=1" not in fields[fields.index("STOPPING=1"):]
    async with db.connect() as c:
        held = (await c.execute(text("select count(*) from chat_sessions where lease_owner is not null and "
                                     "(lease_expires_at is null or lease_expires_at > now())"))).scalar_one()
    assert held == 0
