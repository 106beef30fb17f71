"""`run_coalesced`: discovery runs at most once per interval, however many reconnects trigger it."""

from __future__ import annotations

import asyncio

from bridge.sessions.discovery import run_coalesced
from tests.support.waiting import wait_until


class Gate:
    """A sleep the test ends by hand, so the test decides when an interval is over."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self._release = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        self._release.clear()
        await self._release.wait()

    def release(self) -> None:
        self._release.set()


async def test_triggers_during_the_interval_coalesce_into_one_more_run() -> None:
    trigger = asyncio.Event()
    runs: list[int] = []
    gate = Gate()

    async def once() -> bool:
        runs.append(len(runs) + 1)
        return True

    trigger.set()
    task = asyncio.create_task(run_coalesced(trigger, once, 10.0, lambda ok: 0.0, sleep=gate.sleep))
    try:
        await wait_until(lambda: gate.asked == [10.0], 5, 0.001, message="first run, then the interval")
        for _ in range(20):  # twenty reconnects (legacy prompts) within the interval
            trigger.set()
        assert runs == [1]
        gate.release()
        await wait_until(lambda: len(gate.asked) == 2, 5, 0.001, message="second run, then the interval")
        assert runs == [1, 2] and not trigger.is_set()
        gate.release()  # no trigger meanwhile: no third run
        await asyncio.sleep(0)
        assert runs == [1, 2]
    finally:
        task.cancel()


async def test_a_failed_run_is_retried_after_the_backoff_and_a_success_resets_it() -> None:
    trigger = asyncio.Event()
    outcomes = [False, False, True]
    delays: list[bool] = []
    gate = Gate()

    async def once() -> bool:
        return outcomes.pop(0)

    def retry_delay(ok: bool) -> float:
        delays.append(ok)
        return 0.5

    trigger.set()
    task = asyncio.create_task(run_coalesced(trigger, once, 10.0, retry_delay, sleep=gate.sleep))
    try:
        await wait_until(lambda: gate.asked == [0.5], 5, 0.001)
        gate.release()
        await wait_until(lambda: gate.asked == [0.5, 0.5], 5, 0.001)
        gate.release()
        await wait_until(lambda: gate.asked == [0.5, 0.5, 10.0], 5, 0.001)
        assert delays == [False, False, True] and outcomes == []
    finally:
        task.cancel()
