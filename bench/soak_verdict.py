"""The soak's proof (bench.soak), read once the faults stopped and every replica is up again: the bridge's
legacy queue drained, every session settled, then every session's stored (seq, event_id) list equal to
the upstream's own sync log from seq 0, and what else the database holds that must be nothing (rejects,
unrepaired gaps, events of kind `unknown`) or counted (legacy events, subagent sessions, footprint)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from bench.footprint import footprint
from bridge.store.db import make_engine
from bridge.store.writes import EventStore
from tests.support.bridge_proc import BridgeProcess
from tests.support.opencode import OpencodeServe
from tests.support.stored_rows import stored_ids
from tests.support.waiting import WaitTimeout, wait_until

# Every stored event must map to a known kind (docs/upstream.md §9): the soak fails listing the types that did not.
UNKNOWN_TYPES = "select type, count(*) from chat_session_events where kind = 'unknown' group by type order by type"
QUEUED = ("select count(*) from chat_commands where state in ('queued', 'sending') "
          "and result->>'state' = 'queued'")


@dataclass
class Verdict:
    queue_drained: bool
    converged: bool
    counts: dict[str, tuple[int, int]]  # session -> (stored, upstream) events, at the last comparison
    upstream_events: int
    rejects: int
    gaps: int
    legacy_events: int
    unknown: dict[str, int]  # type -> rows of kind `unknown`; must be empty
    subagent_sessions: int  # child sessions stored (their seq 0 names a parent)
    footprint: dict[str, Any]


async def verdict(database_url: str, upstream_name: str, serve: OpencodeServe, sessions: Sequence[str],
                  settled: Callable[[str, float], Awaitable[None]]) -> Verdict:
    engine = make_engine(database_url)
    store = EventStore(engine, upstream_name)
    counts: dict[str, tuple[int, int]] = {}
    upstream_total = 0
    try:
        async def drained() -> bool:  # every queued bridge prompt sent (the queue loses none)
            async with engine.connect() as conn:
                return int((await conn.execute(text(QUEUED))).scalar_one()) == 0

        try:
            await wait_until(drained, 120, 0.5, message="the bridge's legacy queue drained")
            queue_drained = True
        except WaitTimeout:
            queue_drained = False
        for sid in sessions:
            await settled(sid, 120)

        async def same() -> bool:
            nonlocal upstream_total
            upstream_total = 0
            ok = True
            for sid in sessions:
                log = await serve.sync_log(sid)  # from seq 0: `session.created` is stored too
                upstream = [(int(e["seq"]), str(e["id"])) for e in log]
                stored = await stored_ids(store, sid)
                upstream_total += len(upstream)
                counts[sid] = (len(stored), len(upstream))
                ok = ok and stored == upstream
            return ok

        try:
            await wait_until(same, 180, 0.5, message="stored == the sync log from seq 0 for every session")
            converged = True
        except WaitTimeout:
            converged = False
        async with engine.connect() as conn:
            rejects = int((await conn.execute(text("select count(*) from chat_event_rejects"))).scalar_one())
            gaps = int((await conn.execute(text("select count(*) from chat_session_gaps"))).scalar_one())
            legacy = int((await conn.execute(text(
                "select count(*) from chat_session_events where type not like 'session.next.%'"))).scalar_one())
            unknown = {str(t): int(n) for t, n in (await conn.execute(text(UNKNOWN_TYPES))).all()}
            children = int((await conn.execute(text(
                "select count(*) from chat_session_events where seq = 0 "
                "and payload #>> '{data,info,parentID}' is not null"))).scalar_one())
        sizes = await footprint(engine)  # docs/scaling.md: bytes and rows per event, session and turn
    finally:
        await engine.dispose()
    return Verdict(queue_drained, converged, counts, upstream_total, rejects, gaps, legacy, unknown, children, sizes)


def logged(replicas: Sequence[BridgeProcess], events: tuple[str, ...]) -> dict[str, int]:
    """How many times the replicas logged each event (their logs span every restart)."""
    found: Counter[str] = Counter()
    for b in replicas:
        for line in b.log_path.read_text(errors="replace").splitlines():
            for event in events:
                if f'"event": "{event}"' in line:
                    found[event] += 1
    return dict(found)
