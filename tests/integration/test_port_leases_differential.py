"""The lease and status twins against PostgreSQL on generated histories (docs/ports.md): any sequence of
claims, releases, expiries, deletions, batches, status writes, parking, renewals, hand-offs and adoption
reads gives the same answer at every step, and leaves the same rows, on both. The contract suites
(test_port_leases.py, test_port_status.py) say what the answers mean; this finds where the two drift."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.errors import LeaseHeld, LeaseLost
from bridge.store.db import make_engine
from bridge.store.memory import MemoryTables
from bridge.store.ports import Claim, ClaimAsk
from tests.conftest import run_sync
from tests.support.store_ports import Backend, Event

SESSIONS = ("ses_a", "ses_b", "ses_c")
OWNERS = ("host-a:1:aaaa", "host-b:2:bbbb")
_examples = itertools.count()

_sid, _owner = st.sampled_from(SESSIONS), st.sampled_from(OWNERS)
_op = st.one_of(
    st.tuples(st.just("claim"), _sid, _owner, st.sampled_from([None, "/d/x", "/d/y"])),
    st.tuples(st.just("dead_claim"), _sid, _owner),
    st.tuples(st.just("release"), _sid, st.integers(0, 4)),
    st.tuples(st.just("expire"), _sid),
    st.tuples(st.just("delete"), _sid),
    st.tuples(st.just("write"), _sid, st.integers(0, 4), st.integers(1, 6)),
    st.tuples(st.just("status"), _sid, _owner, st.sampled_from(["running", "idle", "waiting"])),
    st.tuples(st.just("park"), _sid, _owner),
    st.tuples(st.just("heartbeat"), _owner),
    st.tuples(st.just("hand_off"), _owner),
    st.tuples(st.just("adopt"), _owner),
)


async def _step(b: Backend, op: tuple[Any, ...]) -> Any:
    leases, status = b.leases(), b.status()
    name, *args = op
    try:
        if name == "claim":
            (out,) = await leases.claim_many([ClaimAsk(args[0], args[2])], args[1])
            if isinstance(out, Claim):
                return ("claim", out.epoch, out.cursor_seq, out.verdict, out.previous_owner, out.status)
            raise out
        if name == "dead_claim":
            return await leases.claim(args[0], args[1], holder_dead=lambda _holder: True)
        if name == "release":
            return await leases.release(args[0], args[1])
        if name == "expire":
            return await b.expire_lease(args[0])
        if name == "delete":
            return await leases.mark_deleted(args[0])
        if name == "write":
            return await b.store_events(args[0], args[1], [Event(args[2], "text:end")])
        if name == "status":
            return await status.set_status(args[0], args[1], args[2], None)
        if name == "park":
            return await status.park(args[0], args[1], "stuck")
        if name == "heartbeat":
            return await leases.heartbeat(args[0], "host", 1, 15)
        if name == "hand_off":
            return await leases.hand_off(args[0])
        rows = await leases.adoption_candidates(args[0])
        return [(r.session_id, r.directory, r.lease_owner, r.lease_expired) for r in rows]
    except LeaseHeld as e:
        return ("held", e.verdict, e.holder)
    except LeaseLost:
        return "lease lost"


async def _run_both(database_url: str, ops: list[tuple[Any, ...]]) -> tuple[list[Any], list[Any]]:
    engine = make_engine(database_url)
    try:
        pg = Backend("postgres", engine=engine, upstream=f"diff-{next(_examples)}")
        mem = Backend("memory", tables=MemoryTables())
        answers: tuple[list[Any], list[Any]] = ([], [])
        for op in ops:
            for b, out in zip((pg, mem), answers, strict=True):
                out.append((op, await _step(b, op)))
        for b, out in zip((pg, mem), answers, strict=True):
            out.extend([(sid, await b.row(sid)) for sid in SESSIONS])
            out.extend([(sid, await b.status().gaps(sid), await b.leases().stored_cursor(sid)) for sid in SESSIONS])
        return answers
    finally:
        await engine.dispose()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=14))
def test_every_history_answers_the_same_on_postgresql_and_on_the_twin(database_url: str,
                                                                       ops: list[tuple[Any, ...]]) -> None:
    on_postgres, on_twin = run_sync(_run_both(database_url, ops))
    assert on_twin == on_postgres
