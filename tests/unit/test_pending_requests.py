"""The pending-request state machine over the captures of both runtimes (questions: `x12-questions`;
permissions: `x5-legacy-permission` legacy, `k-permission-ask` v2), the question updates, the list routes,
and the check of an answer against its question."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bridge.events import ChatEvent, normalize, parse_frame
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LEGACY_TYPES, LegacyTurnState
from bridge.events.pending import (
    ANSWERED,
    PENDING,
    PERMISSION,
    QUESTION,
    REJECTED,
    UNKNOWN,
    PendingRequests,
    RequestChange,
    change_of,
    permission_state,
)
from bridge.events.question import (
    QuestionSpec,
    check_answers,
    pending_question,
    question_specs,
    question_update,
    settled_while_away,
    stored_question,
)
from bridge.events.syncframes import parse_global_frame
from bridge.fanout.frames import live_question_message, stored_question_message
from bridge.store.commands_pending import StoredRequest
from bridge.upstream.sse import SSEEvent, SSEParser
from tests.support.legacy_rows import legacy_frame
from tests.support.mock_llm import Directive, TextReply, ToolReply, plan_reply

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
X12 = FIXTURES / "x12-questions"
T0 = datetime(2026, 12, 1, 21, 10, tzinfo=UTC)
LEGACY_SID = "ses_dcc8e4610ffeGrWKX3mgSCDiLQ"
V2_SID = "ses_dcc8e334affer5vDVuPeqs9d66"


def _data(path: Path) -> list[str]:
    parser = SSEParser()
    return [i.data for i in parser.feed(path.read_bytes()) + parser.close() if isinstance(i, SSEEvent)]


def global_events(path: Path) -> list[ChatEvent]:
    """Bus events of a `/global/event` capture, mapped as the live reader maps them."""
    out = []
    for d in _data(path):
        frame = parse_global_frame(d)
        if frame.twin:
            continue
        env = frame.envelope
        if env.type not in LEGACY_TYPES:  # the live reader hands on `{id, type, data}` (bridge.upstream.live)
            env = replace(env, raw={"id": env.id, "type": env.type, "data": env.data})
        out.append(normalize_legacy(env, LegacyTurnState()) if env.type in LEGACY_TYPES else normalize(env))
    return out


def run(events: list[ChatEvent]) -> tuple[PendingRequests, list[tuple[str, str, str, str]]]:
    """Feed every change, one second apart; the changes that changed something."""
    machine, seen = PendingRequests(), []
    for n, ev in enumerate(events):
        change = change_of(ev, T0 + timedelta(seconds=n))
        if change is not None and machine.apply(change):
            seen.append((change.kind, change.runtime, change.request_id, change.state))
    return machine, seen


def exchange(name: str) -> Any:
    return json.loads((X12 / name).read_text())["response"]["body"]


# --- questions, both runtimes (x12) ---------------------------------------------------------------------


def test_x12_questions_are_asked_then_answered_legacy_and_rejected_v2() -> None:
    machine, seen = run(global_events(X12 / "global.sse"))
    assert seen == [
        (QUESTION, "legacy", "que_23371c132001IcP4zjgVMt9J6z", PENDING),
        (QUESTION, "legacy", "que_23371c132001IcP4zjgVMt9J6z", ANSWERED),
        (QUESTION, "v2", "que_23371cf44001luvXAhr1bmhW5a", PENDING),
        (QUESTION, "v2", "que_23371cf44001luvXAhr1bmhW5a", REJECTED),
    ]
    assert machine.waiting(LEGACY_SID) is None and machine.waiting(V2_SID) is None


def test_a_session_waits_from_the_ask_to_the_answer() -> None:
    events = global_events(X12 / "global.sse")
    asked = next(n for n, e in enumerate(events) if e.type == "question.asked")
    machine, _ = run(events[: asked + 1])
    assert machine.waiting(LEGACY_SID) == (QUESTION, T0 + timedelta(seconds=asked))
    assert machine.waiting(V2_SID) is None


def test_question_updates_carry_the_questions_the_tool_call_and_the_answers() -> None:
    updates = [u for e in global_events(X12 / "global.sse") if (u := question_update(e)) is not None]
    asked, answered, v2_asked, rejected = updates
    assert (asked.state, asked.runtime, asked.call_id) == ("asked", "legacy", "call_question_22729")
    assert asked.assistant_message_id == "msg_23371bd55001P2qN1dF8cjF0U1"
    assert asked.questions is not None and [o["label"] for o in asked.questions[0]["options"]] == ["Red", "Blue"]
    assert (answered.state, answered.answers) == ("answered", [["Red"]])
    assert (v2_asked.runtime, v2_asked.call_id) == ("v2", "call_question_26333")
    assert (rejected.state, rejected.runtime, rejected.answers) == ("rejected", "v2", None)
    assert stored_question(LEGACY_SID, asked.record) == asked  # the stored record reads back the same


def test_the_list_routes_give_the_same_questions_as_the_live_asks() -> None:
    live = {u.request_id: u for e in global_events(X12 / "global.sse")
            if (u := question_update(e)) is not None and u.state == "asked"}
    (legacy,) = [pending_question("legacy", item) for item in exchange("03-legacy-question-list.json")]
    (v2,) = [pending_question("v2", item, V2_SID) for item in exchange("10-v2-question-list.json")["data"]]
    for got in (legacy, v2):
        assert got is not None
        want = live[got.request_id]
        assert (got.session_id, got.runtime, got.questions, got.call_id) == (
            want.session_id, want.runtime, want.questions, want.call_id)
        assert stored_question(got.session_id, got.record) == got  # a re-sync record reads back alike


def test_no_question_is_in_the_sync_log() -> None:
    assert not [e for e in exchange("13-sync-history.json") if str(e["type"]).startswith("question")]


def test_a_list_item_without_an_id_or_session_is_no_question() -> None:
    assert pending_question("legacy", {"questions": []}) is None
    assert pending_question("legacy", {"id": "que_1"}) is None  # no session: the global list names it
    assert pending_question("v2", "junk", V2_SID) is None


def test_a_question_settled_while_away_is_unknown() -> None:
    u = settled_while_away(V2_SID, "que_1", "v2", "gone")
    assert (u.state, u.settled, u.record["data"]["requestID"]) == ("unknown", True, "que_1")


# --- permissions, both runtimes -------------------------------------------------------------------------


def test_x5_legacy_permission_is_asked_then_answered() -> None:
    events = [normalize_legacy(legacy_frame(d), LegacyTurnState())
              for d in _data(FIXTURES / "x5-legacy-permission" / "legacy.sse")]
    _, seen = run(events)
    assert [(k, r, s) for k, r, _, s in seen] == [(PERMISSION, "legacy", PENDING), (PERMISSION, "legacy", ANSWERED)]


def test_k_v2_permission_is_asked_then_answered() -> None:
    events = [normalize(parse_frame(d)) for d in _data(FIXTURES / "k-permission-ask" / "live.sse")]
    _, seen = run(events)
    assert [(k, r, s) for k, r, _, s in seen] == [(PERMISSION, "v2", PENDING), (PERMISSION, "v2", ANSWERED)]


@pytest.mark.parametrize(("reply", "state"), [(None, PENDING), ("once", ANSWERED), ("always", ANSWERED),
                                              ("reject", REJECTED), ("unknown", UNKNOWN)])
def test_permission_replies_map_to_request_states(reply: str | None, state: str) -> None:
    assert permission_state(reply) == state


# --- the machine's rules --------------------------------------------------------------------------------


def ch(rid: str, state: str, second: int = 0, kind: str = QUESTION, sid: str = "ses_a") -> RequestChange:
    return RequestChange(kind, sid, rid, state, T0 + timedelta(seconds=second))


def test_a_settled_request_stays_settled_and_the_first_outcome_wins() -> None:
    m = PendingRequests()
    assert m.apply(ch("q1", PENDING)) and m.apply(ch("q1", ANSWERED, 1))
    assert not m.apply(ch("q1", PENDING, 2))  # a late ask (a re-sync read before the answer)
    assert not m.apply(ch("q1", REJECTED, 3))
    assert m.state("ses_a", "q1") == ANSWERED and m.waiting("ses_a") is None


def test_an_answer_seen_before_its_ask_settles_it() -> None:
    m = PendingRequests()
    assert m.apply(ch("q1", REJECTED))
    assert not m.apply(ch("q1", PENDING, 1))
    assert m.pending("ses_a") == []


def test_a_repeated_ask_keeps_the_first_time_and_the_oldest_request_says_what_the_session_waits_for() -> None:
    m = PendingRequests()
    assert m.apply(ch("p1", PENDING, 5, PERMISSION)) and m.apply(ch("q1", PENDING, 2))
    assert not m.apply(ch("q1", PENDING, 9))
    assert m.waiting("ses_a") == (QUESTION, T0 + timedelta(seconds=2))
    m.apply(ch("q1", ANSWERED, 10))
    assert m.waiting("ses_a") == (PERMISSION, T0 + timedelta(seconds=5))
    m.forget("ses_a")
    assert m.snapshot() == {}


# --- answers --------------------------------------------------------------------------------------------

SPECS = question_specs(exchange("03-legacy-question-list.json")[0]["questions"])


def test_the_capture_question_is_single_choice_with_free_text_allowed() -> None:
    assert [QuestionSpec(("Red", "Blue"), multiple=False, custom=True)] == SPECS


@pytest.mark.parametrize(("answers", "want"), [
    ([["Red"]], [["Red"]]),
    ([[{"text": "Green, please"}]], [["Green, please"]]),
])
def test_an_answer_that_fits_is_taken(answers: object, want: list[list[str]]) -> None:
    assert check_answers(SPECS, answers) == want


@pytest.mark.parametrize(("answers", "says"), [
    ([["Purple"]], "none of the options"),
    ([["red"]], "none of the options"),
    ([["Red", "Blue"]], "exactly one"),
    ([[]], "exactly one"),
    ([], "one per question"),
    ([["Red"], ["Blue"]], "one per question"),
    ("Red", "one per question"),
    ([[1]], "label or"),
    ([[{"text": "  "}]], "typed answer"),
    ([[{"text": "a", "x": 1}]], "label or"),
])
def test_an_answer_that_does_not_fit_says_why(answers: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_answers(SPECS, answers)


def test_multiple_choice_takes_several_distinct_options_and_custom_false_refuses_free_text() -> None:
    specs = question_specs([{"question": "q", "header": "h", "multiple": True, "custom": False,
                             "options": [{"label": "A", "description": ""}, {"label": "B", "description": ""}]}])
    assert check_answers(specs, [["A", "B"]]) == [["A", "B"]]
    with pytest.raises(ValueError, match="twice"):
        check_answers(specs, [["A", "A"]])
    with pytest.raises(ValueError, match="options only"):
        check_answers(specs, [[{"text": "C"}]])


# --- the frames and the mock's directive ------------------------------------------------------------------


def test_question_frames_live_and_read_back_say_the_same() -> None:
    asked, answered, _, _ = [u for e in global_events(X12 / "global.sse") if (u := question_update(e)) is not None]
    live = live_question_message(asked, T0)
    assert live["questions"][0]["multiple"] is False and live["questions"][0]["custom"] is True
    assert (live["state"], live["asked_at"], live["call_id"]) == ("asked", "2026-12-01T21:10:00Z",
                                                                  "call_question_22729")
    done = live_question_message(answered, T0)
    assert (done["state"], done["answers"], "questions" in done) == ("answered", [["Red"]], False)
    row = StoredRequest("question", LEGACY_SID, asked.request_id, "legacy", asked.record, T0, "answered",
                        [["Red"]], "alice", T0 + timedelta(seconds=1))
    kept = stored_question_message(row)
    assert {k: kept[k] for k in ("questions", "call_id", "assistant_message_id", "asked_at")} == {
        k: live[k] for k in ("questions", "call_id", "assistant_message_id", "asked_at")}
    assert (kept["state"], kept["answers"], kept["answered_by"]) == ("answered", [["Red"]], "alice")


def test_the_mock_asks_the_capture_question_then_answers_in_text() -> None:
    first = plan_reply(Directive("question", ()), 0)
    assert isinstance(first, ToolReply) and first.tool == "question"
    assert first.arguments["questions"] == [{k: v for k, v in q.items() if k != "custom"}
                                            for q in exchange("03-legacy-question-list.json")[0]["questions"]]
    multi = plan_reply(Directive("question", ("multi",)), 0)
    assert isinstance(multi, ToolReply) and multi.arguments["questions"][0]["multiple"] is True
    assert isinstance(plan_reply(Directive("question", ()), 1), TextReply)
