"""The claim queue (bridge.sessions.claim_batch) on the in-memory twin of the store: many claims in few
transactions, each caller its own answer, failures kept to the claims they belong to."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from bridge.errors import LeaseHeld
from bridge.lease import ClaimVerdict
from bridge.sessions.claim_batch import ClaimBatcher
from bridge.store.chat_sessions import ClaimAsk, ClaimOutcome
from bridge.store.memory import MemoryLeaseStore
from tests.support.waiting import wait_until

NOW = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
ME = "host-a:100:aaaa"


class Transactions:
    """`claim_many` of the twin, recording each transaction's sessions; scripted failures and a gate."""

    def __init__(self) -> None:
        self.store = MemoryLeaseStore(clock=lambda: NOW)
        self.batches: list[list[str]] = []
        self.fail: list[Exception] = []
        self.poisoned: set[str] = set()  # a batch holding one of these fails whole (a value its row refuses)
        self.gate: asyncio.Event | None = None
        self.running = 0
        self.most_at_once = 0

    async def claim_many(self, asks: Sequence[ClaimAsk]) -> list[ClaimOutcome]:
        self.batches.append([a.session_id for a in asks])
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.fail:
                raise self.fail.pop(0)
            if self.poisoned & {a.session_id for a in asks}:
                raise ValueError("invalid byte sequence (test)")
            return await self.store.claim_many(asks, ME)
        finally:
            self.running -= 1


async def test_claims_asked_in_the_same_moment_go_in_batches_of_the_bound_and_each_caller_gets_its_own() -> None:
    tx = Transactions()
    b = ClaimBatcher(tx.claim_many, max_batch=200)
    sids = [f"ses_{k:04d}" for k in range(450)]
    claims = await asyncio.gather(*(b.claim(sid, f"/d/{sid}") for sid in sids))
    assert [len(batch) for batch in tx.batches] == [200, 200, 50]
    assert [c.epoch for c in claims] == [1] * 450 and all(c.verdict is ClaimVerdict.FREE for c in claims)
    assert all(tx.store.rows[sid].lease_owner == ME and tx.store.rows[sid].directory == f"/d/{sid}" for sid in sids)


async def test_a_lone_claim_is_a_batch_of_one_and_carries_the_stored_cursor_and_status() -> None:
    tx = Transactions()
    tx.store.put("ses_A", cursor_seq=7, status="waiting", status_reason="permission: bash")
    claim = await ClaimBatcher(tx.claim_many).claim("ses_A")
    assert tx.batches == [["ses_A"]]
    assert (claim.epoch, claim.cursor_seq, claim.status, claim.status_reason) == (1, 7, "waiting", "permission: bash")


async def test_a_held_lease_is_refused_to_its_caller_alone() -> None:
    tx = Transactions()
    tx.store.put("ses_held", lease_owner="host-b:200:bbbb", lease_epoch=4, lease_expires_at=NOW + timedelta(seconds=9))
    b = ClaimBatcher(tx.claim_many)
    held, free = await asyncio.gather(b.claim("ses_held"), b.claim("ses_free"), return_exceptions=True)
    assert isinstance(held, LeaseHeld) and held.verdict is ClaimVerdict.HELD and held.holder == "host-b:200:bbbb"
    assert not isinstance(free, BaseException) and free.epoch == 1
    assert tx.batches == [["ses_held", "ses_free"]] and tx.store.rows["ses_held"].lease_epoch == 4


async def test_a_second_claim_of_the_same_session_supersedes_the_first_in_the_next_batch() -> None:
    tx = Transactions()
    b = ClaimBatcher(tx.claim_many)
    first, second = await asyncio.gather(b.claim("ses_A"), b.claim("ses_A"))
    assert (first.epoch, second.epoch) == (1, 2) and second.verdict is ClaimVerdict.OURS
    assert tx.batches == [["ses_A"], ["ses_A"]]


async def test_a_failure_of_the_environment_fails_every_claim_of_the_batch_once() -> None:
    tx = Transactions()
    tx.fail.append(ConnectionRefusedError("database away (test)"))
    b = ClaimBatcher(tx.claim_many)
    got = await asyncio.gather(*(b.claim(f"ses_{k}") for k in range(5)), return_exceptions=True)
    assert all(isinstance(g, ConnectionRefusedError) for g in got)
    assert len(tx.batches) == 1 and not tx.store.rows  # not asked again here: each caller retries itself
    assert (await b.claim("ses_0")).epoch == 1


async def test_one_claim_whose_row_fails_fails_alone_the_others_are_taken() -> None:
    tx = Transactions()
    tx.poisoned.add("ses_5")
    b = ClaimBatcher(tx.claim_many)
    got = await asyncio.gather(*(b.claim(f"ses_{k}") for k in range(8)), return_exceptions=True)
    assert isinstance(got[5], ValueError)
    assert all(not isinstance(g, BaseException) and g.epoch == 1 for k, g in enumerate(got) if k != 5)
    assert "ses_5" not in tx.store.rows
    assert len(tx.batches) <= 1 + 2 * 3  # halved down to the one claim: log2(8) levels


async def test_at_most_the_bound_of_transactions_run_at_once_and_the_queue_grows_meanwhile() -> None:
    tx = Transactions()
    tx.gate = asyncio.Event()
    b = ClaimBatcher(tx.claim_many, max_batch=2, at_once=2)
    first = [asyncio.create_task(b.claim(f"ses_{k}")) for k in range(4)]
    await wait_until(lambda: len(tx.batches) == 2, 5, 0.001, message="two batches running")
    later = [asyncio.create_task(b.claim(f"ses_{k}")) for k in range(4, 9)]
    await asyncio.sleep(0)
    assert b.waiting == 5 and tx.most_at_once == 2
    tx.gate.set()
    await asyncio.gather(*first, *later)
    assert tx.most_at_once == 2 and sorted(s for batch in tx.batches for s in batch) == [f"ses_{k}" for k in range(9)]


async def test_a_caller_cancelled_before_its_batch_is_left_out() -> None:
    tx = Transactions()
    tx.gate = asyncio.Event()
    b = ClaimBatcher(tx.claim_many, at_once=1)
    running = asyncio.create_task(b.claim("ses_A"))
    await wait_until(lambda: len(tx.batches) == 1, 5, 0.001, message="the first batch running")
    gone = asyncio.create_task(b.claim("ses_gone"))
    kept = asyncio.create_task(b.claim("ses_kept"))
    await asyncio.sleep(0)
    gone.cancel()
    tx.gate.set()
    await asyncio.gather(running, kept)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert tx.batches == [["ses_A"], ["ses_kept"]] and "ses_gone" not in tx.store.rows


async def test_settled_waits_until_no_claim_waits_or_runs_and_at_most_its_bound() -> None:
    tx = Transactions()
    tx.gate = asyncio.Event()
    b = ClaimBatcher(tx.claim_many, max_batch=2, at_once=1)
    await b.settled(0.0)  # nothing asked: settled at once
    claims = [asyncio.create_task(b.claim(f"ses_{k}")) for k in range(5)]
    await wait_until(lambda: len(tx.batches) == 1, 5, 0.001, message="the first batch running")
    waiter = asyncio.create_task(b.settled(30.0))
    await asyncio.sleep(0)
    assert not waiter.done()
    started = asyncio.get_running_loop().time()
    await b.settled(0.05)  # its bound: a stream of claims never holds a catch-up longer
    assert asyncio.get_running_loop().time() - started >= 0.05
    tx.gate.set()
    await asyncio.wait_for(waiter, 5)
    assert all(c.done() for c in claims) and len(tx.batches) == 3
