"""The sync-log call planner (bridge.upstream.sync_plan): which sessions one `POST /sync/history` asks
for under a byte bound, and whose items are whose."""

from __future__ import annotations

import itertools
import json

import pytest

from bridge.upstream.sync_plan import (
    MAX_NAMED,
    SYNC_CUTOFF_MAX,
    Wanted,
    body,
    body_bytes,
    halves,
    leave_out,
    plan_call,
    split_answer,
)


def _size(call: list[Wanted], known: dict[str, int], max_named: int = MAX_NAMED) -> int:
    return len(body_bytes(body(call, known, max_named)))


def _known(*ids: str) -> dict[str, int]:
    return dict.fromkeys(ids, 0)


def test_the_body_names_the_asked_with_their_cursor_and_every_other_known_one_with_the_largest() -> None:
    b = body([Wanted("ses_A", 5), Wanted("ses_D", 0)], _known("ses_A", "ses_B", "ses_C"))
    assert b == {"ses_A": 5, "ses_D": 0, "ses_B": SYNC_CUTOFF_MAX, "ses_C": SYNC_CUTOFF_MAX}


def test_a_session_from_start_is_not_named_at_all() -> None:
    assert body([Wanted("ses_A", -1)], _known("ses_A", "ses_B")) == {"ses_B": SYNC_CUTOFF_MAX}


def test_the_body_never_names_more_than_the_serve_takes_and_leaves_out_the_largest_logs_first() -> None:
    known = {f"ses_K{i:04d}": i for i in range(3000)}  # ses_K2999 has the largest log
    b = body([Wanted("ses_K0000", 0), Wanted("ses_N", -1)], known, max_named=10)
    assert len(b) == 10
    assert b["ses_K0000"] == 0 and "ses_N" not in b
    assert sorted(k for k, v in b.items() if v == SYNC_CUTOFF_MAX) == [f"ses_K{i}" for i in range(2991, 3000)]
    assert len(body([], known)) == MAX_NAMED <= 996


def test_leave_out_skips_the_asked_and_takes_what_there_is() -> None:
    known = {"ses_A": 9, "ses_B": 5, "ses_C": 7}
    assert leave_out(known, {"ses_A"}, 1) == ["ses_C"]
    assert sorted(leave_out(known, {"ses_A"}, 5)) == ["ses_B", "ses_C"]
    assert leave_out(known, set(), 0) == []


def test_everything_fits_one_call_when_the_bounds_allow() -> None:
    wanted = [Wanted(f"ses_{i}", i) for i in range(100)]
    taken, later = plan_call(wanted, _known(*(w.session_id for w in wanted)), max_sessions=1000,
                             max_request_bytes=1 << 20)
    assert taken == wanted and later == []


def test_max_sessions_cuts_the_call_and_keeps_the_order() -> None:
    wanted = [Wanted(f"ses_{i}", i) for i in range(10)]
    taken, later = plan_call(wanted, {}, max_sessions=3, max_request_bytes=1 << 20)
    assert taken == wanted[:3] and later == wanted[3:]


def test_named_sessions_are_capped_per_call_but_sessions_from_start_are_not_named() -> None:
    wanted = [Wanted(f"ses_{i}", 1) for i in range(5)] + [Wanted(f"ses_S{i}", -1) for i in range(5)]
    taken, later = plan_call(wanted, {}, max_sessions=100, max_request_bytes=1 << 20, max_named=3)
    assert taken == wanted[:3] + wanted[5:] and later == wanted[3:5]


def test_a_session_asked_twice_goes_into_a_later_call() -> None:
    wanted = [Wanted("ses_A", 1), Wanted("ses_B", 1), Wanted("ses_A", 7)]
    taken, later = plan_call(wanted, {}, max_sessions=10, max_request_bytes=1 << 20)
    assert taken == wanted[:2] and later == [wanted[2]]
    taken2, later2 = plan_call(later, {}, max_sessions=10, max_request_bytes=1 << 20)
    assert taken2 == [Wanted("ses_A", 7)] and later2 == []


@pytest.mark.parametrize("bound", [60, 100, 150, 300, 1000, 3000])
@pytest.mark.parametrize("n_known", [0, 3, 10, 40])
@pytest.mark.parametrize("max_named", [1, 4, MAX_NAMED])
def test_every_planned_body_is_within_the_bounds_and_every_session_is_asked_once(bound: int, n_known: int,
                                                                                 max_named: int) -> None:
    known = {f"ses_K{i}": i for i in range(n_known)}
    # Cursors of every width, from start, known and unknown ids, one id twice.
    wanted = [Wanted(f"ses_K{i}", c) for i, c in zip(range(n_known), itertools.cycle([0, 9, 12345, -1]))]
    wanted += [Wanted(f"ses_N{i}", c) for i, c in zip(range(12), itertools.cycle([-1, 3, 10**15]))]
    wanted += [Wanted("ses_N0", 77)]
    left = list(wanted)
    asked: list[Wanted] = []
    calls = 0
    while left:
        taken, left = plan_call(left, known, max_sessions=5, max_request_bytes=bound, max_named=max_named)
        assert taken, "planning always makes progress"
        assert len({w.session_id for w in taken}) == len(taken)
        b = body(taken, known, max_named)
        assert len(b) <= max_named
        # Over the bound only when one session alone is over it (with its left-out names).
        assert len(body_bytes(b)) <= bound or len(taken) == 1
        asked += taken
        calls += 1
        assert calls <= len(wanted)
    assert sorted(asked, key=repr) == sorted(wanted, key=repr)


def test_split_answer_gives_each_session_its_items_above_its_cursor_in_order() -> None:
    call = [Wanted("ses_A", 2), Wanted("ses_B", -1)]
    items = [
        {"aggregate_id": "ses_B", "seq": 0}, {"aggregate_id": "ses_A", "seq": 2}, {"aggregate_id": "ses_A", "seq": 3},
        {"aggregate_id": "ses_Z", "seq": 0}, {"aggregate_id": "ses_B", "seq": 1}, {"aggregate_id": "ses_A", "seq": "x"},
        "garbage", {"seq": 4}, {"aggregate_id": 5},
    ]
    split = split_answer(items, call)
    assert split.items == [[items[2], items[5]], [items[0], items[4]]]
    assert split.seen == {"ses_A": 3, "ses_B": 1, "ses_Z": 0}
    assert split.unattributed == ["garbage", {"seq": 4}, {"aggregate_id": 5}]


def test_a_bool_seq_is_not_taken_for_a_number() -> None:
    split = split_answer([{"aggregate_id": "ses_A", "seq": True}], [Wanted("ses_A", 5)])
    assert split.items == [[{"aggregate_id": "ses_A", "seq": True}]]  # the ingest rejects it


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_halves_split_a_call_in_two_non_empty_parts_when_it_can(n: int) -> None:
    a, b = halves(list(range(n)))
    assert a + b == list(range(n)) and a and (b or n == 1)


def test_body_bytes_is_compact_json() -> None:
    assert body_bytes({"ses_A": 1}) == b'{"ses_A":1}'
    assert json.loads(body_bytes(body([Wanted("ses_A", 1)], {"ses_B": 0}))) == {"ses_A": 1, "ses_B": SYNC_CUTOFF_MAX}


def test_the_pace_holds_the_next_call_for_what_an_answer_cost_at_most_max_wait() -> None:
    from bridge.upstream.sync_plan import ItemPace

    p = ItemPace(1000, max_wait_s=10)
    assert p.wait(0.0) == 0.0
    p.spent(2000, now=0.0)
    assert p.wait(0.0) == 2.0 and p.wait(1.5) == 0.5 and p.wait(2.0) == 0.0
    p.spent(5_000_000, now=100.0)  # one huge answer: the next call waits the cap, then goes
    assert p.wait(100.0) == 10.0 and p.wait(110.0) == 0.0
    p.spent(3000, now=110.0)
    p.spent(3000, now=110.0)  # debts add up, within the cap
    assert p.wait(110.0) == 6.0
    assert ItemPace(0).wait(0.0) == 0.0  # no pacing
