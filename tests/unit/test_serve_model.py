"""The serve model's pure parts (tests/support/serve_model/): the sync rule, /history pages, the checks of
a sync body, the frames, the fault plan and the clock — what every fake answers by."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support.serve_model import Clock, FaultPlan, ServeModel
from tests.support.serve_model.frames import MAX_NAMED, MAX_SEQ, global_frames, parse_after, sync_item
from tests.support.serve_model.rules import check_sync_body, history_page, items_after, sync_answer

SIDS = ["ses_A", "ses_B", "ses_C"]
logs_st = st.dictionaries(st.sampled_from(SIDS), st.integers(0, 12).map(
    lambda n: list(range(n))), max_size=3)
asked_st = st.dictionaries(st.sampled_from([*SIDS, "ses_unknown"]), st.integers(0, 14), max_size=4)


def log_of(sid: str, seqs: list[int]) -> list[dict[str, Any]]:
    return [{"id": f"e{sid}{s}", "aggregate_id": sid, "seq": s} for s in seqs]


@given(logs_st, asked_st)
def test_the_sync_rule_answers_each_named_session_after_its_cutoff_and_every_other_one_whole(
        seqs: dict[str, list[int]], asked: dict[str, int]) -> None:
    logs = {sid: log_of(sid, s) for sid, s in seqs.items()}
    got = sync_answer(logs, asked, items_after)
    for sid, log in logs.items():
        cut = asked.get(sid)
        assert [i for i in got if i["aggregate_id"] == sid] == [i for i in log if cut is None or i["seq"] > cut]
    assert not any(i["aggregate_id"] == "ses_unknown" for i in got)  # a name the serve does not know: nothing


@given(st.integers(0, 250), st.integers(-5, 300))
def test_a_history_page_holds_at_most_a_hundred_and_at_least_one_and_says_whether_more_follow(
        n: int, limit: int) -> None:
    later = list(range(n))
    page, more = history_page(later, limit)
    size = min(max(limit, 1), 100)
    assert list(page) == later[:size] and more == (n > size)


def test_a_sync_body_is_checked_like_the_serves_400_then_the_500_past_the_named_cap() -> None:
    assert check_sync_body({"ses_A": 0, "ses_B": MAX_SEQ}) is None
    assert check_sync_body([]) == (400, {"name": "BadRequest", "data": {"message": "Expected an object",
                                                                       "kind": "Payload"}})
    for bad in (-1, MAX_SEQ + 1, 1.5, True, "3", None):
        status, body = check_sync_body({"ses_A": bad}) or (0, {})
        assert status == 400 and body["data"]["message"] == 'Expected an integer\n  at ["ses_A"]'
    assert check_sync_body({f"ses_{i}": 0 for i in range(MAX_NAMED)}) is None
    assert (check_sync_body({f"ses_{i}": 0 for i in range(MAX_NAMED + 1)}) or (0,))[0] == 500
    assert (check_sync_body({**{f"ses_{i}": 0 for i in range(MAX_NAMED + 1)}, "x": -1}) or (0,))[0] == 400


def test_after_is_a_digit_string_up_to_the_largest_seq() -> None:
    assert [parse_after(r) for r in ("", "0", "17", str(MAX_SEQ))] == [0, 0, 17, MAX_SEQ]
    assert [parse_after(r) for r in ("abc", "-1", "1.5", str(MAX_SEQ + 1), " 1")] == [None] * 5


def test_a_persisted_event_is_a_bus_frame_and_a_sync_twin_with_the_v2_timestamp_as_iso() -> None:
    env = {"id": "evt_1", "type": "session.next.text.started",
           "durable": {"aggregateID": "ses_A", "seq": 3, "version": 2},
           "data": {"sessionID": "ses_A", "timestamp": 1796004921007}}
    bus, twin = global_frames(env, "/p")
    assert bus == {"directory": "/p", "payload": {"id": "evt_1", "type": "session.next.text.started",
                                                  "properties": {"sessionID": "ses_A",
                                                                 "timestamp": "2026-11-30T02:15:21.007Z"}}}
    assert twin["payload"]["syncEvent"] == {"id": "evt_1", "type": "session.next.text.started.2", "seq": 3,
                                            "aggregateID": "ses_A", "data": bus["payload"]["properties"]}
    assert sync_item(env) == {"id": "evt_1", "aggregate_id": "ses_A", "seq": 3,
                              "type": "session.next.text.started.2", "data": env["data"]}
    legacy = {**env, "type": "message.updated", "durable": None}
    assert global_frames(legacy, None) == [{"payload": {"id": "evt_1", "type": "message.updated",
                                                        "properties": env["data"]}}]


async def test_the_model_gives_both_runtimes_one_seq_order_and_keeps_legacy_events_off_the_durable_log() -> None:
    m = ServeModel()
    m.add_session("ses_A", created=True)
    await m.append("ses_A", "session.next.text.started", {})
    await m.append_legacy("ses_A", "message.updated", {"info": {}})
    await m.append_legacy("ses_A", "message.updated", {"info": {}}, in_log=False)  # a hole of the log
    await m.append("ses_A", "session.next.text.ended", {})
    s = m.sessions["ses_A"]
    assert [i["seq"] for i in s.log] == [0, 1, 2, 4] and [e["durable"]["seq"] for e in s.events] == [1, 4]
    assert m.sync({"ses_A": 1}) == s.log[2:]
    assert m.history(s, 1, 100) == ([s.events[1]], False)
    assert len({i["id"] for i in s.log}) == 4


def test_the_fault_plan_answers_the_first_failing_route_and_cuts_the_next_n_sync_calls() -> None:
    plan = FaultPlan({"live": 503})
    assert plan.failure("history") is None
    assert plan.failure("global", "live") == (503, {"_tag": "InjectedError", "message": "injected 503 on live"})
    plan.sync_drop_next = 2
    assert [plan.drop_sync() for _ in range(3)] == [True, True, False]


def test_the_clock_reads_what_the_test_set() -> None:
    clock = Clock(10.0)
    assert clock() == 10.0 and clock.advance(2.5) == 12.5 and clock() == 12.5
