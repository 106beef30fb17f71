"""OpenCode 2.x's vocabulary → the kinds and fields of today (bridge.events.gen2): an equivalent
conversation of each generation normalizes to the same views (ids aside), every 2.x type has its kind,
markers and turn signals are told apart, a question's answers become a form's answer, and no data content
makes normalization raise."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import BadFrame
from bridge.events import normalize, to_json
from bridge.events.envelope import parse_envelope
from bridge.events.gen2 import (
    GEN1_TWINS,
    GEN2_KINDS,
    form_answer,
    log_marker,
    normalize_any,
    normalize_gen2,
    parse_log_item,
    turn_signal,
)
from bridge.events.kinds import KINDS, TYPE_KINDS, Kind
from bridge.events.stored import stored_event

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"
TOKENS = {"input": 10, "output": 5, "reasoning": 1, "cache": {"read": 2, "write": 0}}
MODEL = {"id": "mock-1", "providerID": "mock"}
# Fields that name upstream objects (ids differ between two serves) or only exist on one side.
IDS = ("event_id", "seq", "session_id", "type", "message_id", "assistant_message_id", "part_id", "call_id",
       "request_id", "timestamp_ms", "tool_name")


def env(type_: str, data: dict[str, Any], seq: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f"evt_{seq or 0:026d}", "type": type_, "data": {"sessionID": SID, **data}}
    if seq is not None:
        out["durable"] = {"aggregateID": SID, "seq": seq, "version": 1}
    return out


def conversation_1x() -> list[dict[str, Any]]:
    """A prompt, a text answer and a tool call, as 1.18.33 writes them (docs/upstream.md §4, §9)."""
    a = {"assistantMessageID": "msg_a"}
    return [
        env("session.next.prompt.admitted", {"messageID": "msg_u", "prompt": {"text": "hi"}, "delivery": "steer"}, 1),
        env("session.next.prompted", {"messageID": "msg_u", "prompt": {"text": "hi"}, "delivery": "steer"}, 2),
        env("session.next.step.started", {**a, "agent": "build", "model": MODEL}, 3),
        env("session.next.text.started", {**a, "textID": "prt_1"}, 4),
        env("session.next.text.delta", {**a, "textID": "prt_1", "delta": "hel"}, None),
        env("session.next.text.ended", {**a, "textID": "prt_1", "text": "hello"}, 5),
        env("session.next.tool.input.started", {**a, "callID": "call_1", "name": "bash"}, 6),
        env("session.next.tool.input.delta", {**a, "callID": "call_1", "delta": "{\"c"}, None),
        env("session.next.tool.input.ended", {**a, "callID": "call_1", "text": "{\"cmd\":\"ls\"}"}, 7),
        env("session.next.tool.failed", {**a, "callID": "call_1",
                                          "error": {"type": "ToolError", "message": "no"}}, 8),
        env("session.next.step.ended", {**a, "finish": "stop", "cost": 0.5, "tokens": TOKENS}, 9),
        env("session.next.model.switched", {"model": MODEL}, 10),
        env("session.next.agent.switched", {"agent": "plan"}, 11),
        env("permission.v2.asked", {"id": "per_1", "action": "bash",
                                    "source": {"messageID": "msg_a", "callID": "call_1"}}, None),
        env("permission.v2.replied", {"requestID": "per_1", "reply": "once"}, None),
    ]


def conversation_2x() -> list[dict[str, Any]]:
    """The same conversation in 2.x's vocabulary (session-event.ts, form.ts, wire-fixture.ts: see the module)."""
    a = {"assistantMessageID": "msg_b"}
    return [
        env("session.input.admitted", {"inputID": "msg_v", "input": {"text": "hi", "delivery": "steer"}}, 1),
        env("session.input.promoted", {"inputID": "msg_v", "input": {"text": "hi", "delivery": "steer"}}, 2),
        env("session.step.started", {**a, "agent": "build", "model": MODEL}, 3),
        env("session.text.started", {**a, "ordinal": 0}, 4),
        env("session.text.delta", {**a, "ordinal": 0, "delta": "hel"}, None),
        env("session.text.ended", {**a, "ordinal": 0, "text": "hello"}, 5),
        env("session.tool.input.started", {**a, "callID": "call_2", "name": "bash"}, 6),
        env("session.tool.input.delta", {**a, "callID": "call_2", "delta": "{\"c"}, None),
        env("session.tool.input.ended", {**a, "callID": "call_2", "text": "{\"cmd\":\"ls\"}"}, 7),
        env("session.tool.failed", {**a, "callID": "call_2", "executed": True,
                                    "error": {"type": "ToolError", "message": "no"}}, 8),
        env("session.step.ended", {**a, "finish": "stop", "cost": 0.5, "tokens": TOKENS}, 9),
        env("session.model.selected", {"model": MODEL}, 10),
        env("session.agent.selected", {"agent": "plan"}, 11),
        env("permission.asked", {"id": "per_2", "action": "bash", "resources": ["*"],
                                 "source": {"type": "tool", "messageID": "msg_b", "callID": "call_2"}}, None),
        env("permission.replied", {"requestID": "per_2", "decision": "once"}, None),
    ]


def view(ev: Any) -> dict[str, Any]:
    return {k: v for k, v in to_json(ev).items() if k not in IDS}


def test_an_equivalent_conversation_normalizes_to_the_same_views() -> None:
    one = [view(normalize(parse_envelope(e))) for e in conversation_1x()]
    two = [view(normalize_any(parse_envelope(e))) for e in conversation_2x()]
    assert one == two
    assert [v["kind"] for v in two][:6] == ["prompt:admitted", "prompt:started", "step:start", "text:start",
                                            "delta:text", "text:end"]


def test_ids_pair_up_as_they_do_on_1x() -> None:
    evs = [normalize_gen2(parse_envelope(e)) for e in conversation_2x()]
    text = [e for e in evs if e.kind in (Kind.TEXT_START, Kind.DELTA_TEXT, Kind.TEXT_END)]
    assert {e.part_id for e in text} == {"msg_b#0"}
    tool = [e for e in evs if e.kind in (Kind.TOOL_INPUT_START, Kind.DELTA_TOOL_INPUT, Kind.TOOL_INPUT_END,
                                         Kind.TOOL_FAIL)]
    assert {e.call_id for e in tool} == {"call_2"}
    assert evs[0].message_id == "msg_v" and evs[-2].request_id == "per_2" and evs[-2].call_id == "call_2"
    # the test fake's tool events name the call `id` (wire-fixture.ts): read the same
    called = normalize_gen2(parse_envelope(env("session.tool.called", {"assistantMessageID": "m", "id": "c9",
                                                                        "input": {}, "executed": False}, 3)))
    assert (called.kind, called.call_id) == (Kind.TOOL_START, "c9")


def test_every_2x_type_has_a_kind_of_today_and_twins_agree_with_1x() -> None:
    assert set(GEN2_KINDS.values()) <= KINDS
    for two, one in GEN1_TWINS.items():
        assert GEN2_KINDS[two] == TYPE_KINDS[one], two
    assert not any(t.startswith("session.next.") for t in GEN2_KINDS)


def test_forms_are_questions() -> None:
    form = {"id": "frm_1", "sessionID": SID, "mode": "form",
            "fields": [{"key": "color", "type": "string", "options": [{"value": "r", "label": "red"}]},
                       {"key": "tags", "type": "multiselect", "options": []}]}
    asked = normalize_any(parse_envelope(env("form.created", {"form": form}, None)))
    replied = normalize_any(parse_envelope(env("form.replied", {"id": "frm_1", "answer": {"color": "r"}}, None)))
    cancelled = normalize_any(parse_envelope(env("form.cancelled", {"id": "frm_1"}, None)))
    assert [(e.kind, e.request_id) for e in (asked, replied, cancelled)] == [
        (Kind.QUESTION_ASKED, "frm_1"), (Kind.QUESTION_REPLIED, "frm_1"), (Kind.QUESTION_REJECTED, "frm_1")]
    assert form_answer(form, [["r"], ["a", "b"]]) == {"color": "r", "tags": ["a", "b"]}
    assert form_answer(form, [["r"], []]) == {"color": "r", "tags": []}
    for bad in ([["r"]], [["r", "g"], []], [[], []]):
        with pytest.raises(BadFrame):
            form_answer(form, bad)
    with pytest.raises(BadFrame):
        form_answer({"fields": [{"type": "string"}]}, [["x"]])


def test_turn_signals_and_log_markers() -> None:
    assert turn_signal("session.execution.started") is True
    for end in ("succeeded", "failed", "interrupted"):
        assert turn_signal(f"session.execution.{end}") is False
        assert GEN2_KINDS[f"session.execution.{end}"] == Kind.NOISE
    assert turn_signal("session.step.ended") is None
    marker = '{"type":"log.synced","aggregateID":"ses_x","seq":4}'
    assert log_marker(marker) == {"type": "log.synced", "aggregateID": "ses_x", "seq": 4}
    assert parse_log_item(marker) is None and parse_log_item('{"type":"log.caught_up","aggregateID":"s"}') is None
    with pytest.raises(BadFrame):
        parse_log_item('{"type":"log.other"}')
    item = parse_log_item('{"id":"evt_1","type":"session.renamed","created":5,'
                          '"durable":{"aggregateID":"ses_x","seq":1,"version":1},"data":{"title":"t"}}')
    assert item is not None and item.session_id == "ses_x"
    ev = normalize_any(item)
    assert (ev.kind, ev.text, ev.timestamp_ms) == (Kind.SESSION_UPDATED, "t", 5)


def test_stored_rows_of_2x_read_back_as_written() -> None:
    for raw in conversation_2x():
        assert stored_event(raw) == normalize_any(parse_envelope(raw))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                               max_size=4), max_leaves=12)


@given(st.sampled_from(sorted(GEN2_KINDS)), st.dictionaries(
    st.sampled_from(["input", "inputID", "ordinal", "assistantMessageID", "callID", "id", "form", "decision",
                     "title", "model", "tokens", "error", "text", "delta", "agent", "finish", "cost"]), JSON,
    max_size=8))
def test_no_data_content_makes_it_raise(type_: str, data: dict[str, Any]) -> None:
    ev = normalize_any(parse_envelope({"id": "evt_x", "type": type_, "data": data}))
    assert ev.kind == GEN2_KINDS[type_]


def test_a_form_reads_as_questions_and_labels_answer_as_values() -> None:
    from bridge.events.gen2 import form_questions
    from bridge.events.question import question_specs, question_update

    form = {"id": "frm_2", "sessionID": SID, "mode": "form", "fields": [
        {"key": "color", "title": "Color?", "type": "string",
         "options": [{"value": "r", "label": "Red", "description": "warm"}, {"value": "g", "label": "Green"}]},
        {"key": "n", "description": "How many?", "type": "integer"},
        {"key": "ok", "type": "boolean"},
        {"key": "tags", "type": "multiselect", "custom": True, "options": [{"value": "a", "label": "A"}]}]}
    qs = form_questions(form)
    assert [(q["question"], q["header"], q["multiple"], q["custom"]) for q in qs] == [
        ("Color?", "color", False, False), ("How many?", "n", False, True), ("ok", "ok", False, False),
        ("tags", "tags", True, True)]
    assert qs[0]["options"] == [{"label": "Red", "description": "warm"}, {"label": "Green"}]
    assert [s.labels for s in question_specs(qs)] == [("Red", "Green"), (), ("true", "false"), ("A",)]
    assert form_answer(form, [["Green"], ["3"], ["false"], ["A", "typed"]]) == {
        "color": "g", "n": 3, "ok": False, "tags": ["a", "typed"]}
    with pytest.raises(BadFrame):
        form_answer(form, [["Red"], ["three"], ["true"], []])
    # `form.created` names its session inside the form: the update belongs to it
    asked = question_update(normalize_any(parse_envelope({"id": "evt_f", "type": "form.created",
                                                          "data": {"form": form}})))
    assert asked is not None
    assert (asked.session_id, asked.request_id, asked.runtime, asked.state) == (SID, "frm_2", "v2", "asked")
    assert asked.questions == qs
