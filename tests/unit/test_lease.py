"""Lease decisions: who may take a session's lease, what counts as an orphan (pure, injected clock)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from bridge.lease import (
    ClaimVerdict,
    IncarnationId,
    LeaseView,
    adoption_reason,
    decide_claim,
    local_holder_dead,
    parse_incarnation,
)

NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
ME = "host-a:100:aaaaaaaaaaaa"
PEER = "host-b:200:bbbbbbbbbbbb"
FUTURE = NOW + timedelta(seconds=5)
PAST = NOW - timedelta(seconds=5)


def never_dead(_owner: str) -> bool:
    return False


def always_dead(_owner: str) -> bool:
    return True


@pytest.mark.parametrize(
    ("owner", "expires", "deleted", "dead", "expected"),
    [
        (None, None, False, False, ClaimVerdict.FREE),
        (None, PAST, False, True, ClaimVerdict.FREE),
        (ME, FUTURE, False, False, ClaimVerdict.OURS),
        (ME, PAST, False, False, ClaimVerdict.OURS),
        (PEER, FUTURE, False, False, ClaimVerdict.HELD),
        (PEER, PAST, False, False, ClaimVerdict.EXPIRED),
        (PEER, NOW, False, False, ClaimVerdict.EXPIRED),  # expiry is exclusive: at the instant, it is gone
        (PEER, None, False, False, ClaimVerdict.EXPIRED),  # never renewed
        (PEER, FUTURE, False, True, ClaimVerdict.HOLDER_DEAD),
        (PEER, FUTURE, True, False, ClaimVerdict.DELETED),
        (None, None, True, False, ClaimVerdict.DELETED),
        (ME, FUTURE, True, False, ClaimVerdict.DELETED),
    ],
)
def test_claim_verdict_for_every_lease_shape(
    owner: str | None, expires: datetime | None, deleted: bool, dead: bool, expected: ClaimVerdict
) -> None:
    lease = LeaseView(owner, 3, expires, deleted)
    assert decide_claim(lease, ME, NOW, always_dead if dead else never_dead) is expected


def test_only_a_live_peer_or_a_deleted_session_refuses_a_claim() -> None:
    owners = [None, ME, PEER]
    expiries = [None, PAST, NOW, FUTURE]
    for owner, expires, deleted, dead in itertools.product(owners, expiries, [False, True], [False, True]):
        verdict = decide_claim(LeaseView(owner, 1, expires, deleted), ME, NOW, always_dead if dead else never_dead)
        live_peer = owner == PEER and expires is not None and expires > NOW and not dead
        assert verdict.takes == (not deleted and not live_peer), (owner, expires, deleted, dead, verdict)


def test_the_holder_probe_is_only_asked_about_unexpired_foreign_leases() -> None:
    asked: list[str] = []

    def probe(owner: str) -> bool:
        asked.append(owner)
        return False

    decide_claim(LeaseView(None, 0, None), ME, NOW, probe)
    decide_claim(LeaseView(ME, 1, FUTURE), ME, NOW, probe)
    decide_claim(LeaseView(PEER, 1, PAST), ME, NOW, probe)
    assert asked == []
    decide_claim(LeaseView(PEER, 1, FUTURE), ME, NOW, probe)
    assert asked == [PEER]


def test_time_moving_past_the_expiry_turns_a_held_lease_into_an_expired_one() -> None:
    lease = LeaseView(PEER, 7, NOW + timedelta(seconds=15))
    verdicts = [decide_claim(lease, ME, NOW + timedelta(seconds=s), never_dead) for s in (0, 14, 15, 16)]
    assert verdicts == [ClaimVerdict.HELD, ClaimVerdict.HELD, ClaimVerdict.EXPIRED, ClaimVerdict.EXPIRED]


def test_incarnation_ids_parse_host_and_pid_and_reject_anything_else() -> None:
    assert parse_incarnation("web-1:4242:0123456789ab") == IncarnationId("web-1", 4242)
    assert parse_incarnation("a:b:c:77:0123") == IncarnationId("a:b:c", 77)  # hostnames may hold colons
    assert parse_incarnation("owner-1") is None
    assert parse_incarnation("host:notapid:x") is None


def test_a_holder_is_dead_only_on_this_host_with_its_pid_gone() -> None:
    alive = {100}

    def pid_alive(pid: int) -> bool:
        return pid in alive

    assert local_holder_dead("host-a:200:x", "host-a", pid_alive)
    assert not local_holder_dead("host-a:100:x", "host-a", pid_alive)
    assert not local_holder_dead("host-b:200:x", "host-a", pid_alive)  # other host: cannot know
    assert not local_holder_dead("owner-1", "host-a", pid_alive)


@pytest.mark.parametrize(
    ("owner", "expired", "dead", "expected"),
    [
        (None, False, False, "last_running"),
        (None, True, True, "last_running"),
        (PEER, True, False, "orphan"),
        (PEER, True, True, "orphan"),
        (PEER, False, True, "orphan_holder_dead"),
        (PEER, False, False, None),
    ],
)
def test_adoption_reason(owner: str | None, expired: bool, dead: bool, expected: str | None) -> None:
    assert adoption_reason(owner, expired, always_dead if dead else never_dead) == expected


# --- the home worker of a session among a host's BRIDGE_WORKERS (docs/operations.md "Workers") -----------


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_each_session_has_one_home_worker_and_the_sessions_spread(workers: int) -> None:
    from bridge.lease import claim_delay, home_worker

    sids = [f"ses_{i:05d}x{i * 7919 % 1000:03d}" for i in range(4000)]
    homes = [home_worker(sid, workers) for sid in sids]
    assert homes == [home_worker(sid, workers) for sid in sids]  # the same answer in every process
    for w in range(workers):
        share = homes.count(w) / len(sids)
        assert abs(share - 1 / workers) < 0.25 / workers, (w, share)
    for sid, home in zip(sids[:200], homes[:200], strict=True):
        delays = [claim_delay(sid, w, workers, 0.7) for w in range(workers)]
        assert delays == [0.0 if w == home else 0.7 for w in range(workers)]


def test_one_worker_is_every_sessions_home() -> None:
    from bridge.lease import claim_delay, home_worker

    assert {home_worker(f"ses_{i}", 1) for i in range(100)} == {0}
    assert claim_delay("ses_A", 0, 1) == 0.0


def test_a_refusal_by_another_worker_of_this_host_lasts_longer_than_one_by_another_host() -> None:
    from bridge.lease import PEER_WORKER_REFUSAL_S, refusal_s

    me = "web-1:100:aa"
    assert refusal_s(me, "web-1:200:bb", 5.0, workers=True) == PEER_WORKER_REFUSAL_S  # a peer worker
    assert refusal_s(me, "web-1:200:bb", 900.0, workers=True) == 900.0  # never shorter than a sweep interval
    assert refusal_s(me, "web-2:200:bb", 5.0, workers=True) == 5.0  # another host: its lease may lapse
    assert refusal_s(me, "web-1:200:bb", 5.0, workers=False) == 5.0  # one process: as before
    assert refusal_s(me, None, 5.0, workers=True) == 5.0
    assert refusal_s(me, "not-an-incarnation", 5.0, workers=True) == 5.0
