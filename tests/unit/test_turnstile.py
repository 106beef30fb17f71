"""bridge.turnstile: within a slice every entry passes; after it the rest wait in order and are let through
a slice's worth per turn of the loop; a cancelled waiter holds nobody up. The clock is injected."""

from __future__ import annotations

import asyncio

from bridge.turnstile import Turnstile, for_loop


class Ticks:
    """A clock that moves 1 ms each time it is read (each entry that reads it did 1 ms of work)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        value = self.now
        self.now += 0.001
        return value


async def turns_until(done: object, limit: int = 100) -> int:
    for n in range(limit):
        if done():  # type: ignore[operator]
            return n
        await asyncio.sleep(0)
    raise AssertionError("never done")


async def test_entries_within_a_slice_pass_at_once() -> None:
    ts = Turnstile(slice_s=1.0, clock=lambda: 0.0)
    for _ in range(50):
        await ts.enter()  # would block forever if it waited: nothing else runs here
    assert ts.queued == 0


async def test_after_the_slice_the_rest_wait_in_order_a_slice_s_worth_per_turn() -> None:
    ts = Turnstile(slice_s=0.0025, clock=Ticks())
    passed: list[int] = []
    growth: list[int] = []

    async def entry(i: int) -> None:
        await ts.enter()
        passed.append(i)

    tasks = [asyncio.create_task(entry(i)) for i in range(10)]
    await asyncio.sleep(0)  # every task's first step: three fit in the slice (0, 1, 2 ms), seven wait
    assert passed == [0, 1, 2] and ts.waiting == 7
    while len(passed) < 10:
        before = len(passed)
        await asyncio.sleep(0)
        growth.append(len(passed) - before)
    await asyncio.gather(*tasks)
    assert passed == list(range(10))
    assert max(growth) <= 3 and ts.queued == 7


async def test_a_cancelled_waiter_is_skipped_and_holds_nobody_up() -> None:
    ts = Turnstile(slice_s=0.0015, clock=Ticks())
    passed: list[int] = []

    async def entry(i: int) -> None:
        await ts.enter()
        passed.append(i)

    tasks = [asyncio.create_task(entry(i)) for i in range(6)]
    await asyncio.sleep(0)
    assert passed == [0, 1] and ts.waiting == 4
    tasks[2].cancel()
    await turns_until(lambda: len(passed) == 5)
    assert passed == [0, 1, 3, 4, 5] and tasks[2].cancelled()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_once_nobody_waits_a_new_slice_lets_the_next_entry_through_at_once() -> None:
    clock = Ticks()
    ts = Turnstile(slice_s=0.0015, clock=clock)
    tasks = [asyncio.create_task(ts.enter()) for _ in range(5)]
    await asyncio.gather(*tasks)
    assert ts.queued == 3
    await asyncio.sleep(0)  # the turn that closes the last slice
    await ts.enter()
    assert ts.queued == 3


async def test_one_turnstile_per_loop() -> None:
    assert for_loop() is for_loop()
    other = await asyncio.to_thread(lambda: asyncio.run(_loop_turnstile_id()))
    assert other != id(for_loop())


async def _loop_turnstile_id() -> int:
    return id(for_loop())
