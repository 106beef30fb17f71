"""The shared sync-log reader (bridge.upstream.sync_batch) against a scripted `post`: gathering, riders,
splitting on a too large answer or a refused cursor, re-queueing after a lost call, cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from bridge.backoff import Backoff
from bridge.errors import BodyTooLarge, InvalidRequest, UpstreamError, UpstreamUnavailable
from bridge.upstream.sync_answer import SyncAnswer, whole_answer
from bridge.upstream.sync_batch import BatchSettings, SyncBatcher
from bridge.upstream.sync_plan import SYNC_CUTOFF_MAX
from tests.support.metric_values import Since
from tests.support.serve_model.rules import items_after, sync_answer
from tests.support.waiting import wait_until

LOGS: dict[str, list[dict[str, Any]]] = {
    f"ses_{c}": [{"id": f"e{c}{s}", "aggregate_id": f"ses_{c}", "seq": s} for s in range(4)] for c in "ABCDEF"}


class Serve:
    """Answers by the serve model's sync rule (named after their cutoff, the others whole); scripted failures."""

    def __init__(self, known: Mapping[str, int] | None = None) -> None:
        self.bodies: list[dict[str, int]] = []
        self.failures: list[BaseException] = []
        self.refuse: set[str] = set()  # a body naming one of these is a 400
        self.max_items: int | None = None  # more items than this: over the body bound
        self.known: dict[str, int] = dict(known or {})
        self.gate: asyncio.Event | None = None
        self.kept: list[dict[str, int]] = []  # what each call asked to keep: session -> cursor

    async def post(self, body: dict[str, int], keep: Mapping[str, int]) -> SyncAnswer:
        self.bodies.append(body)
        self.kept.append(dict(keep))
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        if any(body.get(sid, SYNC_CUTOFF_MAX) != SYNC_CUTOFF_MAX for sid in self.refuse):
            raise InvalidRequest("bad cutoff")  # a cursor of one of these named
        out = sync_answer(LOGS, body, items_after)
        if self.max_items is not None and len(out) > self.max_items:
            raise BodyTooLarge("too large", 2)
        return whole_answer(out, keep, 0)

    def batcher(self, slots: int = 1, **kw: Any) -> SyncBatcher:
        sem = asyncio.Semaphore(slots)
        return SyncBatcher(self.post, lambda: self.known, lambda seen: self.known.update(seen), sem,
                           BatchSettings(window_s=0.001, gather_max_s=0.01, items_per_s=0, **kw),
                           Backoff(0.001, 0.002))


def seqs(items: list[Any]) -> list[int]:
    return [i["seq"] for i in items]


async def test_sessions_asked_together_get_their_own_items_in_one_call() -> None:
    serve = Serve({"ses_A": 3, "ses_B": 3, "ses_C": 3})
    b = serve.batcher()
    got = await asyncio.gather(b.fetch("ses_A", 1), b.fetch("ses_B", -1), b.fetch("ses_C", 3))
    assert [seqs(g) for g in got] == [[2, 3], [0, 1, 2, 3], []]
    assert all(i["aggregate_id"] == "ses_A" for i in got[0])
    assert len(serve.bodies) == 1
    assert serve.bodies[0]["ses_A"] == 1 and serve.bodies[0]["ses_C"] == 3 and "ses_B" not in serve.bodies[0]


async def test_beyond_the_named_cap_the_others_ride_on_the_whole_logs_the_answer_holds_anyway() -> None:
    serve = Serve(dict.fromkeys(LOGS, 3))
    b = serve.batcher(max_named=2)
    got = await asyncio.gather(*(b.fetch(sid, 2) for sid in LOGS))
    assert [seqs(g) for g in got] == [[3]] * len(LOGS)
    assert len(serve.bodies) == 1 and len(serve.bodies[0]) == 2


async def test_an_answer_over_the_bound_is_asked_again_in_halves_and_alone_it_is_that_sessions_error() -> None:
    serve = Serve(dict.fromkeys(LOGS, 3))
    serve.max_items = 2
    b = serve.batcher()
    got = await asyncio.gather(b.fetch("ses_A", 2), b.fetch("ses_B", 2), b.fetch("ses_C", 0),
                               return_exceptions=True)
    assert seqs(got[0]) == [3] and seqs(got[1]) == [3]  # type: ignore[arg-type]
    assert isinstance(got[2], BodyTooLarge)  # 3 items after 0: over the bound even alone
    assert len(serve.bodies) >= 3


async def test_a_refused_cursor_fails_only_its_session() -> None:
    serve = Serve(dict.fromkeys(LOGS, 3))
    serve.refuse = {"ses_B"}
    b = serve.batcher(max_named=3)
    got = await asyncio.gather(b.fetch("ses_A", 2), b.fetch("ses_B", 2), b.fetch("ses_C", 2),
                               return_exceptions=True)
    assert seqs(got[0]) == [3] and seqs(got[2]) == [3]  # type: ignore[arg-type]
    assert isinstance(got[1], InvalidRequest)


async def test_a_lost_call_is_asked_again_together_then_its_error_reaches_every_session() -> None:
    serve = Serve(dict.fromkeys(LOGS, 3))
    serve.failures = [UpstreamUnavailable("cut"), UpstreamUnavailable("cut")]
    b = serve.batcher(retries=3)
    got = await asyncio.gather(b.fetch("ses_A", 2), b.fetch("ses_B", 1))
    assert [seqs(g) for g in got] == [[3], [2, 3]]
    assert len(serve.bodies) == 3
    serve.failures = [UpstreamUnavailable("cut")] * 2
    with pytest.raises(UpstreamUnavailable):
        await serve.batcher(retries=1).fetch("ses_A", 2)
    serve.failures = [UpstreamError("odd")]
    with pytest.raises(UpstreamError):
        await serve.batcher().fetch("ses_A", 2)


async def test_a_session_asked_twice_gets_two_answers_from_its_own_cursors() -> None:
    serve = Serve({"ses_A": 3})
    b = serve.batcher()
    got = await asyncio.gather(b.fetch("ses_A", 0), b.fetch("ses_A", 2))
    assert [seqs(g) for g in got] == [[1, 2, 3], [3]]


async def test_while_the_slot_is_busy_the_queue_grows_into_the_next_call_and_cancelled_asks_are_left_out() -> None:
    serve = Serve(dict.fromkeys(LOGS, 3))
    serve.gate = asyncio.Event()
    b = serve.batcher(slots=1, max_named=len(LOGS), riders=False)
    asked = Since("bridge_sync_call_sessions_sum")
    first = asyncio.create_task(b.fetch("ses_A", 2))
    await wait_until(lambda: serve.bodies, 5, 0.001, message="the first call posted")
    rest = [asyncio.create_task(b.fetch(sid, 2)) for sid in ("ses_B", "ses_C", "ses_D")]
    gone = asyncio.create_task(b.fetch("ses_E", 2))
    await asyncio.sleep(0.02)
    gone.cancel()
    serve.gate.set()
    assert seqs(await first) == [3]
    assert [seqs(await t) for t in rest] == [[3]] * 3
    assert len(serve.bodies) == 2
    assert serve.bodies[1]["ses_E"] == SYNC_CUTOFF_MAX  # left out: nobody waits for it any more
    assert asked.value == 4
