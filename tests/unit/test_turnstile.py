"""bridge.perf.turnstile: within a slice every entry passes; after it the rest wait in order and are let through
a batch per turn of the loop, sized by the time batches really take; a cancelled waiter holds nobody up.
The clock is injected: each entry "works" by moving it."""

from __future__ import annotations

import asyncio

from bridge.perf.turnstile import Turnstile
from tests.support.serve_model import Clock


async def turns_until(done: object, limit: int = 100) -> int:
    for n in range(limit):
        if done():  # type: ignore[operator]
            return n
        await asyncio.sleep(0)
    raise AssertionError("never done")


def entries(ts: Turnstile, clock: Clock, n: int, cost_s: float, passed: list[int]) -> list[asyncio.Task[None]]:
    async def entry(i: int) -> None:
        await ts.enter()
        passed.append(i)
        clock.now += cost_s  # the CPU work the entry guards

    return [asyncio.create_task(entry(i)) for i in range(n)]


def passes_at_once(ts: Turnstile) -> bool:
    """`enter()` returned without suspending (it did not queue)."""
    entry = ts.enter()
    try:
        entry.send(None)
    except StopIteration:
        return True
    entry.close()
    return False


async def test_entries_within_a_slice_pass_at_once() -> None:
    ts = Turnstile(slice_s=1.0, clock=lambda: 0.0)
    for _ in range(50):
        assert passes_at_once(ts)
    assert ts.waiting == 0


async def test_after_the_slice_the_rest_wait_in_order_and_pass_a_batch_per_turn() -> None:
    clock = Clock()
    ts = Turnstile(slice_s=0.0025, clock=clock)
    passed: list[int] = []
    tasks = entries(ts, clock, 12, 0.001, passed)
    await asyncio.sleep(0)  # every task's first step: three fit in the slice (0, 1, 2 ms), nine wait
    assert passed == [0, 1, 2] and ts.waiting == 9 and ts.per_turn == 3
    per_turn: list[int] = []
    while len(passed) < 12:
        before = len(passed)
        await asyncio.sleep(0)
        per_turn.append(len(passed) - before)
    await asyncio.gather(*tasks)
    assert passed == list(range(12)) and ts.waiting == 0
    assert max(per_turn) <= 3  # 3 ms of work per batch: over the slice, so the batch never grows


async def test_a_batch_that_overran_the_slice_halves_the_next_one() -> None:
    clock = Clock()
    ts = Turnstile(slice_s=0.0035, clock=clock)
    passed: list[int] = []
    cheap = entries(ts, clock, 5, 0.001, passed)  # 4 fit (at 0, 1, 2, 3 ms), the 5th waits
    costly = entries(ts, clock, 12, 0.003, passed)  # expensive reads behind it
    await asyncio.sleep(0)
    assert len(passed) == 4 and ts.per_turn == 4
    await turns_until(lambda: len(passed) >= 8)  # the cheap one and three costly ones: 10 ms of work
    await turns_until(lambda: ts.per_turn != 4)
    assert ts.per_turn == 2  # that batch overran the slice: halved
    await asyncio.gather(*cheap, *costly)
    assert passed == [*range(5), *range(12)]


async def test_batches_quicker_than_the_slice_grow() -> None:
    clock = Clock()
    ts = Turnstile(slice_s=0.0035, clock=clock)
    passed: list[int] = []
    first = entries(ts, clock, 1, 0.004, passed)  # one read overruns the slice alone
    rest = entries(ts, clock, 30, 0.0, passed)  # then cheap ones: each batch takes no time
    await asyncio.sleep(0)
    assert passed == [0] and ts.per_turn == 1 and ts.waiting == 30  # every cheap one waited
    sizes: list[int] = []
    while len(passed) < 31:
        before = len(passed)
        await asyncio.sleep(0)
        sizes.append(len(passed) - before)
    await asyncio.gather(*first, *rest)
    assert max(sizes) > 2


async def test_a_cancelled_waiter_is_skipped_and_holds_nobody_up() -> None:
    clock = Clock()
    ts = Turnstile(slice_s=0.0015, clock=clock)
    passed: list[int] = []
    tasks = entries(ts, clock, 6, 0.001, passed)
    await asyncio.sleep(0)
    assert passed == [0, 1] and ts.waiting == 4
    tasks[2].cancel()
    await turns_until(lambda: len(passed) == 5)
    assert passed == [0, 1, 3, 4, 5] and tasks[2].cancelled()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_once_nobody_waits_the_next_entry_opens_a_fresh_slice_and_passes_at_once() -> None:
    clock = Clock()
    ts = Turnstile(slice_s=0.0015, clock=clock)
    passed: list[int] = []
    tasks = entries(ts, clock, 5, 0.001, passed)
    await asyncio.sleep(0)
    assert passed == [0, 1] and ts.waiting == 3
    await asyncio.gather(*tasks)
    for _ in range(3):  # the turns that close the last batch's slice
        await asyncio.sleep(0)
    clock.now += 1.0  # much later, a quiet session's read
    assert passes_at_once(ts)
