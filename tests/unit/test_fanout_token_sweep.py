"""The shared token sweep of open sockets: the pure deadlines (bridge.fanout.token_deadlines) and the one
timer that drives them (bridge.fanout.token_sweep)."""

from __future__ import annotations

import math
import time

from bridge.fanout.token_deadlines import TokenDeadlines
from bridge.fanout.token_sweep import TokenSweep
from tests.support.waiting import wait_until


def test_expired_keys_come_out_earliest_first_and_only_once() -> None:
    d: TokenDeadlines[str] = TokenDeadlines()
    d.add("c", "j1", 30.0)
    d.add("a", "j1", 10.0)
    d.add("b", "j2", 20.0)
    d.add("never", "j3", math.inf)
    assert len(d) == 4 and d.next_expiry() == 10.0
    assert d.expired(9.9) == []
    assert d.expired(20.0) == ["a", "b"]
    assert d.expired(20.0) == [] and "a" not in d and "c" in d
    assert d.next_expiry() == 30.0
    assert d.expired(1e12) == ["c"]
    assert d.next_expiry() is None and list(d.jtis()) == ["j3"] and len(d) == 1  # inf never expires


def test_a_removed_or_re_added_key_keeps_only_its_current_deadline() -> None:
    d: TokenDeadlines[str] = TokenDeadlines()
    d.add("a", "j", 10.0)
    d.add("b", "j", 11.0)
    d.remove("a")
    d.remove("a")  # twice: nothing
    assert d.next_expiry() == 11.0
    d.add("b", "j", 50.0)  # re-added (a widened token keeps its expiry, but any change is honoured)
    assert d.expired(20.0) == [] and d.next_expiry() == 50.0
    d.add("b", "k", math.inf)
    assert d.next_expiry() is None and d.jtis() == ["k"]


def test_pop_jti_takes_every_key_of_that_token_and_no_other() -> None:
    d: TokenDeadlines[str] = TokenDeadlines()
    for key, jti in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a")]:
        d.add(key, jti, 100.0)
    d.remove("a2")
    assert sorted(d.jtis()) == ["a", "b"]
    assert d.pop_jti("a") == ["a1", "a3"]
    assert d.pop_jti("a") == [] and d.jtis() == ["b"] and len(d) == 1
    assert d.expired(100.0) == ["b1"]


def test_the_heap_drops_dead_entries_and_stays_right() -> None:
    d: TokenDeadlines[int] = TokenDeadlines()
    for k in range(5000):
        d.add(k, f"j{k % 7}", 1000.0 + k)
    for k in range(0, 5000, 2):
        d.remove(k)
    assert len(d._heap) <= 2 * len(d) + 64  # compacted on the way
    assert d.expired(1000.0 + 99) == list(range(1, 100, 2))
    assert d.next_expiry() == 1101.0


class _Ended:
    def __init__(self) -> None:
        self.expired: list[str] = []
        self.revoked: list[str] = []


def _sweep(ended: _Ended, revoked: set[str], asked: list[str], check_s: float = 0.05) -> TokenSweep[str]:
    def is_revoked(jti: str) -> bool:
        asked.append(jti)
        return jti in revoked

    return TokenSweep(revoked=is_revoked, now=time.time, check_s=check_s,
                      on_expired=ended.expired.append, on_revoked=ended.revoked.append)


async def test_each_socket_is_ended_at_its_own_expiry_by_one_timer() -> None:
    ended, asked = _Ended(), []
    sweep = _sweep(ended, set(), asked, check_s=60.0)
    now = time.time()
    sweep.add("late", "j1", now + 0.3)
    first = sweep._timer
    sweep.add("early", "j2", now + 0.1)  # earlier: the one timer is moved, not a second one made
    assert sweep._timer is not None and sweep._timer is not first and first is not None and first.cancelled()
    sweep.add("never", "j3", math.inf)
    await wait_until(lambda: ended.expired == ["early"], 5, 0.01)
    assert time.time() >= now + 0.1
    await wait_until(lambda: ended.expired == ["early", "late"], 5, 0.01)
    assert time.time() >= now + 0.3 and len(sweep) == 1 and asked == []
    sweep.remove("never")
    assert sweep._timer is None  # nothing open, nothing armed


async def test_a_revocation_ends_every_socket_of_that_token_in_one_look_and_no_other() -> None:
    ended, revoked, asked = _Ended(), set[str](), []
    sweep = _sweep(ended, revoked, asked)
    for key, jti in [("a1", "leak"), ("b1", "kept"), ("a2", "leak")]:
        sweep.add(key, jti, math.inf)
    await wait_until(lambda: len(asked) >= 4, 5, 0.01)  # looked twice: nothing revoked
    assert ended.revoked == [] and asked[:2] in (["leak", "kept"], ["kept", "leak"])
    revoked.add("leak")
    await wait_until(lambda: ended.revoked == ["a1", "a2"], 5, 0.01)
    assert ended.expired == [] and len(sweep) == 1
    n = len(asked)
    await wait_until(lambda: len(asked) > n + 1, 5, 0.01)
    assert set(asked[n:]) == {"kept"}  # once per distinct token and look
    sweep.close()


async def test_a_failing_callback_does_not_stop_the_other_deadlines() -> None:
    ended = _Ended()

    def boom(key: str) -> None:
        ended.expired.append(key)
        if key == "first":
            raise RuntimeError("a callback failed")

    sweep: TokenSweep[str] = TokenSweep(revoked=lambda _j: False, now=time.time, check_s=60.0,
                                        on_expired=boom, on_revoked=ended.revoked.append)
    now = time.time()
    sweep.add("first", "j", now + 0.05)
    sweep.add("with it", "j", now + 0.05)  # due in the same look as the failing one
    sweep.add("second", "j", now + 0.2)
    await wait_until(lambda: ended.expired == ["first", "with it", "second"], 5, 0.01)
    sweep.remove("gone")  # never added: nothing
    assert len(sweep) == 0 and sweep._timer is None
