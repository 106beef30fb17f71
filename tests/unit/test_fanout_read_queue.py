"""The fair queue of WebSocket reads and the gathering of shared reads (bridge.fanout.read_queue,
bridge.fanout.shared_reads): turns round-robin per owner, the per-owner bound, the only refusal, and the
invariant that a read serves only subscribers that joined before it started."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bridge.fanout.read_queue import ReadQueue, ReadQueueFull, Ticket, busy_message
from bridge.fanout.shared_reads import SharedReads
from tests.support.waiting import wait_until


async def _turns(queue: ReadQueue, tickets: list[Ticket]) -> list[str]:
    """Release turns one at a time; the owners in the order they got them."""
    order: list[str] = []
    pending = list(tickets)
    while pending:
        ready = [t for t in pending if t.has_turn]
        assert len(ready) == 1, [t.owner for t in ready]
        order.append(ready[0].owner)
        pending.remove(ready[0])
        ready[0].release()
    return order


async def test_owners_take_turns_round_robin_and_first_come_first_served_within_one() -> None:
    q = ReadQueue(1)
    first = await q.enqueue("a")  # a free turn: granted at once
    assert first.has_turn
    tickets = [await q.enqueue(o) for o in ("flood", "flood", "flood", "flood", "b", "c")]
    assert q.waiting == 6
    first.release()
    assert await _turns(q, tickets) == ["flood", "b", "c", "flood", "flood", "flood"]
    assert q.waiting == 0 and q.busy == 0


async def test_an_owner_at_its_bound_waits_for_its_own_line_while_others_still_queue() -> None:
    q = ReadQueue(1, per_owner=2)
    running = await q.enqueue("x")
    mine = [await q.enqueue("flood"), await q.enqueue("flood")]
    third = asyncio.create_task(q.enqueue("flood"))
    await asyncio.sleep(0)
    assert not third.done()  # held: two of its reads already wait
    other = await q.enqueue("b")  # another owner is not held
    running.release()  # flood's first read gets the turn: its line shortens, the third may queue
    t3 = await asyncio.wait_for(third, 1)
    assert mine[0].has_turn and not t3.has_turn
    for t in (mine[0], mine[1], other, t3):
        t.withdraw()
    assert q.waiting == 0 and q.busy == 0


async def test_a_full_queue_refuses_with_busy_and_a_retry_after() -> None:
    q = ReadQueue(1, max_waiting=2)
    held = [await q.enqueue("a"), await q.enqueue("b"), await q.enqueue("c")]
    with pytest.raises(ReadQueueFull) as e:
        await q.enqueue("d")
    assert e.value.retry_after_s >= 1.0
    msg = busy_message(e.value.retry_after_s, "r1", "ses_A")
    assert msg["code"] == "busy" and msg["retry_after"] == e.value.retry_after_s and msg["id"] == "r1"
    for t in held:
        t.withdraw()


async def test_a_cancelled_waiter_leaves_the_queue_and_a_granted_turn_given_back_goes_on() -> None:
    q = ReadQueue(1)
    running = await q.enqueue("a")
    waiter = await q.enqueue("b")
    nxt = await q.enqueue("c")
    task = asyncio.create_task(waiter.granted())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert q.waiting == 1
    running.release()
    assert nxt.has_turn
    nxt.withdraw()  # an unused turn given back
    assert q.busy == 0


async def test_a_shared_read_serves_the_joiners_gathered_before_it_started_and_not_a_later_one() -> None:
    reads = SharedReads(None, ReadQueue(1), 10)  # type: ignore[arg-type]  # no store: the reads are given
    blocker = await reads.queue.enqueue("other")  # the only turn is taken: joiners gather
    started: list[list[str]] = []
    gate = asyncio.Event()

    async def read(r: Any) -> dict[Any, int]:
        started.append(sorted(r.wanted))
        await gate.wait()
        return {e: len(started) for e in r.wanted}

    key = ("head", "")
    early = [asyncio.create_task(reads._shared(o, key, sid, 0, read, 2))
             for o, sid in (("a", "ses_A"), ("b", "ses_A"), ("c", "ses_B"), ("d", "ses_C"), ("e", "ses_A"))]
    await wait_until(lambda: reads.queue.waiting == 5, 5, 0.001, message="the joiners queued")
    blocker.release()
    # One read for ses_A's three subscribers and ses_B (two entries at most per read); ses_C gathers the next.
    await wait_until(lambda: started == [["ses_A", "ses_B"]], 5, 0.001, message="the first read started")
    late = asyncio.create_task(reads._shared("f", key, "ses_A", 0, read, 2))  # arrives while it runs
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*early) == [1, 1, 1, 2, 1]
    assert await late == 2 and started == [["ses_A", "ses_B"], ["ses_A", "ses_C"]]
    assert reads.queue.busy == 0 and reads.queue.waiting == 0
