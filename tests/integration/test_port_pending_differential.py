"""The pending requests' twin against PostgreSQL on generated histories (docs/ports.md): any sequence of
questions asked and settled, permissions asked and replied, answers through the bridge and reads gives the
same answer at every step on both."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.events.question import QuestionUpdate
from bridge.store.db import make_engine
from bridge.store.memory import MemoryTables
from bridge.store.ports import StoredRequest
from tests.conftest import run_sync
from tests.support.store_ports import Backend

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
_examples = itertools.count()

_rid, _sid = st.sampled_from(["req_1", "req_2", "req_3"]), st.sampled_from(["ses_a", "ses_b"])
_runtime, _at = st.sampled_from(["v2", "legacy"]), st.integers(0, 3).map(lambda s: T0 + timedelta(seconds=s))
_op = st.one_of(
    st.tuples(st.just("ask"), _rid, _sid, _runtime, _at),
    st.tuples(st.just("settle"), _rid, _sid, st.sampled_from(["answered", "rejected"]),
              st.sampled_from([None, [["A"]], [["B"]]]), _at),
    st.tuples(st.just("perm_ask"), _rid, _sid, _runtime, _at),
    st.tuples(st.just("perm_reply"), _rid, _sid, st.sampled_from([None, "once", "reject"])),
    st.tuples(st.just("answered_by"), _rid, st.sampled_from(["alice", "bob"]), st.sampled_from([None, [["A"]]])),
    st.tuples(st.just("get"), _rid),
    st.tuples(st.just("questions"), _sid),
    st.tuples(st.just("session_requests"), _sid, st.sampled_from(["question", "permission"]),
              st.sampled_from([None, "v2", "legacy"])),
    st.tuples(st.just("pending"), st.sampled_from([None, "v2", "legacy"]), st.integers(1, 4)),
    st.tuples(st.just("sessions_of"), st.lists(_rid, max_size=3)),
)


def _listed(rows: list[StoredRequest]) -> list[tuple[str, str]]:
    return [(r.request_id, r.kind) for r in rows]


async def _step(b: Backend, op: tuple[Any, ...]) -> Any:
    pending = b.pending()
    name, *a = op
    if name == "ask":
        return await pending.question(QuestionUpdate(a[1], a[0], "asked", a[2], {"id": a[0]}), a[3])
    if name == "settle":
        return await pending.question(QuestionUpdate(a[1], a[0], a[2], "v2", {"id": a[0], "s": a[2]}, answers=a[3]),
                                      a[4])
    if name == "perm_ask":
        return await b.permission(a[1], a[0], asked_at=a[3], runtime=a[2])
    if name == "perm_reply":
        return await b.permission_replied(a[1], a[0], a[2])
    if name == "answered_by":
        return await pending.answered_by(a[0], a[1], a[2])
    if name == "get":
        got = await pending.get(a[0])
        return None if got is None else (got.kind, got.session_id, got.runtime, got.asked, got.asked_at, got.reply,
                                         got.answer, got.answered_by)
    if name == "questions":
        return _listed(await pending.questions(a[0]))
    if name == "session_requests":
        return await pending.session_requests(a[0], a[1], a[2])
    if name == "pending":
        return _listed(await pending.pending(limit=a[1], runtime=a[0]))
    return await pending.sessions_of(a[0])


async def _run_both(database_url: str, ops: list[tuple[Any, ...]]) -> tuple[list[Any], list[Any]]:
    engine = make_engine(database_url)
    try:
        pg = Backend("postgres", engine=engine, upstream=f"pending-diff-{next(_examples)}")
        mem = Backend("memory", tables=MemoryTables())
        answers: tuple[list[Any], list[Any]] = ([], [])
        for op in ops:
            for b, out in zip((pg, mem), answers, strict=True):
                out.append((op, await _step(b, op)))
        return answers
    finally:
        await engine.dispose()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=20))
def test_every_history_answers_the_same_on_postgresql_and_on_the_twin(database_url: str,
                                                                       ops: list[tuple[Any, ...]]) -> None:
    on_postgres, on_twin = run_sync(_run_both(database_url, ops))
    assert on_twin == on_postgres
