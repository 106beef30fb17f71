"""Planning a batch of lease claims (bridge.store.chat_sessions.claim_plan): pure, no database."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from bridge.lease import ClaimVerdict, LeaseView, decide_claim
from bridge.store.chat_sessions.claim_plan import ClaimAsk, decide_batch, next_batch, sorted_rows, storable_directory

NOW = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
ME = "host-a:100:aaaa"
PEER = "host-b:200:bbbb"


def asks(*ids: str) -> list[ClaimAsk]:
    return [ClaimAsk(sid, f"/d/{sid}") for sid in ids]


def test_a_batch_takes_the_oldest_claims_up_to_its_bound_and_the_rest_keep_their_order() -> None:
    waiting = asks("ses_c", "ses_a", "ses_d", "ses_b")
    taken, later = next_batch(waiting, 2)
    assert [a.session_id for a in taken] == ["ses_c", "ses_a"]
    assert [a.session_id for a in later] == ["ses_d", "ses_b"]


def test_a_second_claim_of_a_session_waits_for_the_next_batch() -> None:
    waiting = asks("ses_a", "ses_b", "ses_a", "ses_c", "ses_a")
    taken, later = next_batch(waiting, 10)
    assert [a.session_id for a in taken] == ["ses_a", "ses_b", "ses_c"]
    assert [a.session_id for a in later] == ["ses_a", "ses_a"]
    again, last = next_batch(later, 10)
    assert [a.session_id for a in again] == ["ses_a"] and [a.session_id for a in last] == ["ses_a"]


@pytest.mark.parametrize("bound", [1, 2, 3, 7])
def test_every_claim_is_in_exactly_one_batch_in_its_order_per_session(bound: int) -> None:
    waiting = asks(*(f"ses_{k % 4}" for k in range(13)))
    batches: list[list[ClaimAsk]] = []
    rest = waiting
    while rest:
        taken, rest = next_batch(rest, bound)
        assert 1 <= len(taken) <= bound and len({a.session_id for a in taken}) == len(taken)
        batches.append(taken)
    flat = [a for b in batches for a in b]
    assert sorted(map(id, flat)) == sorted(map(id, waiting))
    for sid in {a.session_id for a in waiting}:  # a session's claims are served in the order they were asked
        mine = [i for i, b in enumerate(batches) for a in b if a.session_id == sid]
        assert mine == sorted(mine) and len(set(mine)) == len(mine)


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        next_batch(asks("ses_a"), 0)


def test_rows_are_ensured_in_session_id_order_and_a_directory_postgresql_cannot_hold_is_dropped() -> None:
    ids, dirs = sorted_rows([ClaimAsk("ses_b", "/b"), ClaimAsk("ses_a", "/a\x00x"), ClaimAsk("ses_c", None)])
    assert ids == ["ses_a", "ses_b", "ses_c"]
    assert dirs == [None, "/b", None]
    assert storable_directory("/ok") == "/ok" and storable_directory(None) is None


def test_a_session_twice_in_one_batch_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        sorted_rows(asks("ses_a", "ses_a"))


LEASES = [
    LeaseView(None, 0, None),
    LeaseView(ME, 3, NOW + timedelta(seconds=5)),
    LeaseView(PEER, 2, NOW + timedelta(seconds=5)),
    LeaseView(PEER, 2, NOW - timedelta(seconds=5)),
    LeaseView(PEER, 2, None),
    LeaseView("other:300:cccc", 4, NOW + timedelta(seconds=5)),
    LeaseView(None, 1, None, deleted=True),
]


@pytest.mark.parametrize("dead", [set(), {PEER}, {PEER, "other:300:cccc"}])
def test_each_verdict_of_a_batch_is_the_verdict_of_one_claim_alone(dead: set[str]) -> None:
    for combo in itertools.permutations(range(len(LEASES)), 4):
        ids = [f"ses_{k}" for k in combo]
        locked = {sid: LEASES[k] for sid, k in zip(ids, combo, strict=True)}
        verdicts = decide_batch(asks(*ids), locked, ME, NOW, lambda o: o in dead)
        assert verdicts == {sid: decide_claim(locked[sid], ME, NOW, lambda o: o in dead) for sid in ids}


def test_a_session_without_a_locked_row_gets_no_verdict() -> None:
    verdicts = decide_batch(asks("ses_a", "ses_gone"), {"ses_a": LeaseView(None, 0, None)}, ME, NOW, lambda _: False)
    assert verdicts == {"ses_a": ClaimVerdict.FREE}
