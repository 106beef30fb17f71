"""The adoption sweep on PostgreSQL reads only what it may adopt (docs/lifecycle.md, "Adoption"): with a live
peer holding N sessions, the rows and statements a sweep reads, and the holders it judges, do not grow with
N; a dead holder's sessions are still all adopted.

Reads are counted at the driver (every statement and the rows PostgreSQL returned for it), not timed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.lease import HolderProbe
from bridge.sessions.sweep import Sweep, SweepTimes
from bridge.sessions.warm_table import WarmSession
from bridge.store.chat_sessions import ClaimAsk, LeaseStore

from .conftest import UPSTREAM

HOST = "bridge-host"
ME = f"{HOST}:{os.getpid()}:me"
LIVE_PID, DEAD_PID = 4_000_001, 4_000_002  # judged by the probe below, never by the machine's processes
PEER, DEAD = f"{HOST}:{LIVE_PID}:peer", f"{HOST}:{DEAD_PID}:dead"


@dataclass
class Reads:
    statements: int = 0
    rows: int = 0


@contextmanager
def counted(engine: AsyncEngine) -> Iterator[Reads]:
    reads = Reads()

    def after(_conn: Any, cursor: Any, _stmt: str, _params: Any, _ctx: Any, _many: bool) -> None:
        reads.statements += 1
        reads.rows += max(cursor.rowcount, 0)  # PostgreSQL's "SELECT n": the rows sent to us

    event.listen(engine.sync_engine, "after_cursor_execute", after)
    try:
        yield reads
    finally:
        event.remove(engine.sync_engine, "after_cursor_execute", after)


@dataclass
class Warmed:
    """The registry's side of the sweep: what it was asked to warm, and why (nothing is warm before)."""

    reasons: dict[str, str] = field(default_factory=dict)

    def get(self, session_id: str) -> WarmSession | None:
        return None

    def is_deleted(self, session_id: str) -> bool:
        return False

    def idle_owned(self, horizon: float) -> list[tuple[str, WarmSession]]:
        return []

    def subscribers(self, session_id: str) -> int:
        return 0

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.reasons[session_id] = reason
        return True

    async def release(self, session_id: str, reason: str = "request") -> None:
        raise AssertionError("the adoption sweep releases nothing")


class NoActivity:
    def status(self, session_id: str) -> None:
        return None

    def is_active(self, session_id: str) -> bool:
        return False


async def _hold(leases: LeaseStore, owner: str, ids: list[str]) -> None:
    outcomes = await leases.claim_many([ClaimAsk(s, f"/d/{s}") for s in ids], owner, lease_ttl_s=600)
    assert all(not isinstance(o, Exception) for o in outcomes)


async def _sweep(engine: AsyncEngine, leases: LeaseStore) -> tuple[Reads, list[int], Warmed]:
    probed: list[int] = []

    def pid_alive(pid: int) -> bool:
        probed.append(pid)
        return pid != DEAD_PID

    warmed = Warmed()
    sweep = Sweep(leases, warmed, NoActivity(), SweepTimes(ME, idle_ttl_s=600, interval_s=5),
                  holder_dead=HolderProbe(True, HOST, pid_alive), clock=lambda: 0.0)
    with counted(engine) as reads:
        await sweep.adopt_orphans()
    return reads, probed, warmed


async def test_a_live_peers_sessions_are_not_read_and_a_dead_holders_are_all_adopted(engine: AsyncEngine) -> None:
    leases = LeaseStore(engine, UPSTREAM)
    await _hold(leases, ME, ["ses_mine"])  # our own live lease: never a candidate
    await _hold(leases, PEER, [f"ses_peer_{k:04d}" for k in range(10)])
    small, small_probed, small_warmed = await _sweep(engine, leases)

    await _hold(leases, PEER, [f"ses_peer_{k:04d}" for k in range(10, 1000)])  # the peer now holds 100x
    large, large_probed, large_warmed = await _sweep(engine, leases)

    assert (large.statements, large.rows) == (small.statements, small.rows)
    assert (small.statements, small.rows) == (2, 1)  # the orphans (none), then one distinct live holder
    assert small_probed == large_probed == [LIVE_PID]  # the holder judged once, not once a session
    assert small_warmed.reasons == large_warmed.reasons == {}

    dead_ids = [f"ses_dead_{k:04d}" for k in range(300)]
    await _hold(leases, DEAD, dead_ids)
    after_death, probed, warmed = await _sweep(engine, leases)

    assert warmed.reasons == dict.fromkeys(dead_ids, "orphan_holder_dead")  # every one, and only those
    assert sorted(probed) == [LIVE_PID, DEAD_PID]
    assert (after_death.statements, after_death.rows) == (3, 2 + len(dead_ids))  # + the dead holder's rows
