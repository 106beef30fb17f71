"""parse_frame / normalize: the envelope rules, the kind table, and defensive field extraction."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.events import (
    ERROR_FALLBACK_MAX,
    KINDS,
    TYPE_KINDS,
    BadFrame,
    ChatEvent,
    Envelope,
    error_fallback,
    is_delta,
    is_noise,
    normalize,
    parse_envelope,
    parse_frame,
    to_json,
)
from bridge.events.kinds import PART_KINDS

SES = "ses_A"


def frame(event_type: str, data: Any = None, *, seq: int | None = 1, **extra: Any) -> str:
    env: dict[str, Any] = {"id": "evt_1", "type": event_type}
    if seq is not None:
        env["durable"] = {"aggregateID": SES, "seq": seq, "version": 1}
    env["data"] = {"timestamp": 1796004921122, "sessionID": SES} if data is None else data
    env.update(extra)
    return json.dumps(env)


def ev(event_type: str, data: dict[str, Any], **kw: Any) -> ChatEvent:
    return normalize(parse_frame(frame(event_type, {"sessionID": SES, **data}, **kw)))


def bad(text: str) -> str:
    with pytest.raises(BadFrame) as info:
        parse_frame(text)
    return info.value.reason


# --- parse_frame -------------------------------------------------------------------------------------


def test_durable_envelope_is_parsed_with_seq_version_and_session() -> None:
    env = parse_frame(frame("session.next.step.ended", seq=6))
    assert (env.id, env.type, env.seq, env.version, env.aggregate_id, env.session_id) == (
        "evt_1",
        "session.next.step.ended",
        6,
        1,
        SES,
        SES,
    )
    assert env.data["timestamp"] == 1796004921122


def test_raw_is_the_whole_envelope_untouched_including_unknown_keys() -> None:
    text = frame("session.next.text.ended", location={"directory": "/p"}, future={"x": [1, 2]})
    assert parse_frame(text).raw == json.loads(text)


def test_ephemeral_envelope_has_no_seq() -> None:
    env = parse_frame(frame("session.next.text.delta", seq=None))
    assert (env.seq, env.version, env.aggregate_id, env.session_id) == (None, None, None, SES)


def test_session_id_falls_back_to_the_aggregate_id() -> None:
    assert parse_frame(frame("session.next.prompted", {"sessionID": 7})).session_id == SES


def test_envelope_without_data_is_accepted_as_empty_data() -> None:
    env = parse_frame(json.dumps({"id": "evt_1", "type": "server.connected"}))
    assert env.data == {} and env.session_id is None


def test_seq_zero_is_valid() -> None:
    # session.created carries seq 0 on /api/event (docs/upstream.md §3.1); after a delete seqs restart at 0.
    assert parse_frame(frame("session.created", seq=0)).seq == 0


@pytest.mark.parametrize(
    "text", ["", "{", "not json", '{"id":"a",}', "NaN", '{"id":"e","type":"t","x":Infinity}']
)
def test_invalid_json_is_bad_json(text: str) -> None:
    assert bad(text) == "bad_json"


def test_number_too_large_for_a_float_is_bad_json() -> None:
    assert bad('{"id":"e","type":"t","data":{"cost":1e999}}') == "bad_json"


def test_integer_with_too_many_digits_is_bad_json() -> None:
    # Python refuses int strings over 4300 digits with a ValueError; it must surface as a BadFrame.
    assert bad('{"id":"e","type":"t","data":{"x":' + "1" * 5000 + "}}") == "bad_json"


def test_pathologically_nested_json_is_bad_json_not_a_crash() -> None:
    assert bad("[" * 100_000 + "]" * 100_000) == "bad_json"


@pytest.mark.parametrize(
    "obj",
    [
        [],
        "s",
        1,
        None,
        {"type": "t"},
        {"id": "e"},
        {"id": 1, "type": "t"},
        {"id": "e", "type": None},
        {"id": "", "type": "t"},
        {"id": "e", "type": ""},
        {"id": "e", "type": "t", "data": []},
        {"id": "e", "type": "t", "data": None},
        {"id": "e", "type": "t", "data": "x"},
    ],
)
def test_wrong_envelope_shape_is_bad_shape(obj: object) -> None:
    assert bad(json.dumps(obj)) == "bad_shape"


@pytest.mark.parametrize(
    "durable",
    [
        None,
        [],
        "x",
        {},
        {"seq": None},
        {"seq": "1"},
        {"seq": 1.0},
        {"seq": 1.5},
        {"seq": True},
        {"seq": False},
        {"seq": -1},
        {"seq": 1, "version": "1"},
        {"seq": 1, "version": True},
        {"seq": 1, "version": 1.0},
        {"seq": 1, "aggregateID": 5},
        {"seq": 1, "aggregateID": ["ses"]},
    ],
)
def test_wrong_durable_block_is_bad_durable(durable: object) -> None:
    assert bad(json.dumps({"id": "e", "type": "session.next.prompted", "durable": durable, "data": {}})) == (
        "bad_durable"
    )


def test_durable_with_only_seq_is_enough() -> None:
    env = parse_frame(json.dumps({"id": "e", "type": "t", "durable": {"seq": 3}, "data": {}}))
    assert (env.seq, env.version, env.aggregate_id) == (3, None, None)


def test_legacy_envelope_is_rejected_as_legacy() -> None:
    text = json.dumps(
        {
            "id": "evt_1",
            "type": "session.next.step.ended",
            "properties": {"sessionID": SES, "timestamp": "2026-11-30T02:15:21.966Z"},
        }
    )
    with pytest.raises(BadFrame) as info:
        parse_frame(text)
    assert info.value.reason == "legacy_envelope"
    assert isinstance(info.value, ValueError)


def test_parse_envelope_validates_an_already_decoded_history_item() -> None:
    item = json.loads(frame("session.next.prompted", seq=2))
    assert parse_envelope(item).seq == 2
    with pytest.raises(BadFrame):
        parse_envelope({"id": "e", "type": "t", "durable": {"seq": "2"}})


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parse_frame_raises_nothing_but_bad_frame_on_any_text(text: str) -> None:
    with contextlib.suppress(BadFrame):
        parse_frame(text)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
_DATA_KEYS = [
    "timestamp",
    "sessionID",
    "messageID",
    "assistantMessageID",
    "textID",
    "reasoningID",
    "callID",
    "prompt",
    "delivery",
    "agent",
    "model",
    "finish",
    "cost",
    "tokens",
    "error",
    "text",
    "delta",
    "name",
    "tool",
    "id",
    "action",
    "source",
    "requestID",
    "reply",
]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([*TYPE_KINDS, "session.next.future.thing", "x"]),
    st.dictionaries(st.sampled_from(_DATA_KEYS), _json, max_size=10),
)
def test_normalize_never_raises_on_wrong_shaped_fields(event_type: str, data: dict[str, Any]) -> None:
    event = normalize(parse_frame(json.dumps({"id": "e", "type": event_type, "data": data})))
    json.dumps(to_json(event))  # the view is always serializable
    for name in ("timestamp_ms", "tokens_input", "tokens_output", "tokens_reasoning"):
        value = getattr(event, name)
        assert value is None or type(value) is int
    assert event.cost is None or type(event.cost) is float


# --- kinds -------------------------------------------------------------------------------------------

CATALOGUE = {
    "session.next.prompt.admitted": "prompt:admitted",
    "session.next.prompted": "prompt:started",
    "session.next.step.started": "step:start",
    "session.next.step.ended": "step:end",
    "session.next.step.failed": "step:fail",
    "session.next.text.started": "text:start",
    "session.next.text.ended": "text:end",
    "session.next.reasoning.started": "reasoning:start",
    "session.next.reasoning.ended": "reasoning:end",
    "session.next.tool.input.started": "tool:input-start",
    "session.next.tool.input.ended": "tool:input-end",
    "session.next.tool.called": "tool:start",
    "session.next.tool.success": "tool:success",
    "session.next.tool.failed": "tool:fail",
    "session.next.agent.switched": "agent:switch",
    "session.next.model.switched": "model:switch",
    "session.next.text.delta": "delta:text",
    "session.next.reasoning.delta": "delta:reasoning",
    "session.next.tool.input.delta": "delta:tool-input",
    "permission.v2.asked": "permission:asked",
    "permission.v2.replied": "permission:replied",
    "session.created": "session:created",
    "session.deleted": "session:deleted",
    "session.updated": "session:updated",
    "server.connected": "server:connected",
    "plugin.added": "noise",
    "catalog.updated": "noise",
    "reference.updated": "noise",
    "integration.updated": "noise",
    "file.watcher.updated": "noise",
}


@pytest.mark.parametrize(("event_type", "kind"), CATALOGUE.items())
def test_catalogue_type_maps_to_its_kind(event_type: str, kind: str) -> None:
    assert normalize(parse_frame(frame(event_type))).kind == kind


@pytest.mark.parametrize(
    "event_type",
    [
        "session.next.brand.new",
        "todo.brand.new",
        "brand.new",
        "SESSION.NEXT.PROMPTED",
    ],
)
def test_unknown_types_map_to_unknown(event_type: str) -> None:
    event = normalize(parse_frame(frame(event_type, {"sessionID": SES, "assistantMessageID": "msg_M"})))
    assert event.kind == "unknown"
    assert event.assistant_message_id == "msg_M"  # common ids are still extracted


def test_kinds_constant_lists_every_kind_including_unknown() -> None:
    assert set(CATALOGUE.values()) | {"unknown"} <= KINDS
    assert set(TYPE_KINDS.values()) | set(PART_KINDS.values()) | {"unknown"} == KINDS


def test_every_section_9_type_has_a_kind() -> None:
    legacy_only = [
        "message.updated",
        "message.part.updated",
        "message.part.delta",
        "session.status",
        "session.idle",
        "session.error",
        "session.diff",
        "server.heartbeat",
    ]
    assert all(t in TYPE_KINDS for t in [*CATALOGUE, *legacy_only])


def test_is_noise_and_is_delta() -> None:
    assert is_noise("plugin.added") and is_noise("file.watcher.updated")
    assert not is_noise("server.connected") and not is_noise("session.next.text.delta")
    assert {k for k in KINDS if is_delta(k)} == {"delta:text", "delta:reasoning", "delta:tool-input",
                                                      "delta:compaction"}


# --- field extraction --------------------------------------------------------------------------------


def test_prompt_fields() -> None:
    e = ev(
        "session.next.prompt.admitted", {"messageID": "msg_U", "prompt": {"text": "hi"}, "delivery": "queue"}
    )
    assert (e.kind, e.message_id, e.text, e.delivery) == ("prompt:admitted", "msg_U", "hi", "queue")


def test_step_started_fields() -> None:
    e = ev(
        "session.next.step.started",
        {"assistantMessageID": "msg_M", "agent": "build", "model": {"id": "mock-1", "providerID": "mock"}},
    )
    assert (e.assistant_message_id, e.agent, e.model_id, e.provider_id) == (
        "msg_M",
        "build",
        "mock-1",
        "mock",
    )


def test_step_ended_tool_calls_is_a_step_end_with_finish() -> None:
    tokens = {"input": 100, "output": 10, "reasoning": 0, "cache": {"read": 1, "write": 2}}
    e = ev("session.next.step.ended", {"finish": "tool-calls", "cost": 0, "tokens": tokens})
    assert (e.kind, e.finish, e.cost) == ("step:end", "tool-calls", 0.0)
    assert (e.tokens_input, e.tokens_output, e.tokens_reasoning) == (100, 10, 0)
    assert (e.tokens_cache_read, e.tokens_cache_write) == (1, 2)


def test_text_ended_and_delta_carry_text_and_part_id() -> None:
    ended = ev(
        "session.next.text.ended", {"assistantMessageID": "msg_M", "textID": "text-0", "text": "Hello"}
    )
    delta = ev("session.next.text.delta", {"textID": "text-0", "delta": "He"}, seq=None)
    assert (ended.part_id, ended.text) == ("text-0", "Hello")
    assert (delta.kind, delta.part_id, delta.text, delta.seq) == ("delta:text", "text-0", "He", None)


def test_reasoning_part_id_comes_from_reasoning_id() -> None:
    e = ev("session.next.reasoning.ended", {"reasoningID": "r-0", "text": "Let me think"})
    assert (e.kind, e.part_id, e.text) == ("reasoning:end", "r-0", "Let me think")


def test_tool_start_comes_from_tool_called_never_from_input_started() -> None:
    started = ev("session.next.tool.input.started", {"callID": "call_1", "name": "bash"})
    called = ev("session.next.tool.called", {"callID": "call_1", "tool": "bash", "input": {"command": "ls"}})
    assert (started.kind, started.tool_name, started.call_id) == ("tool:input-start", "bash", "call_1")
    assert (called.kind, called.tool_name, called.call_id) == ("tool:start", "bash", "call_1")


def test_tool_input_ended_carries_the_argument_json_text() -> None:
    e = ev("session.next.tool.input.ended", {"callID": "c", "text": '{"command": "ls"}'})
    assert e.text == '{"command": "ls"}'


def test_agent_and_model_switch_fields() -> None:
    a = ev("session.next.agent.switched", {"messageID": "msg_1", "agent": "plan"})
    m = ev("session.next.model.switched", {"messageID": "msg_2", "model": {"id": "gpt", "providerID": "oa"}})
    assert (a.kind, a.message_id, a.agent) == ("agent:switch", "msg_1", "plan")
    assert (m.kind, m.message_id, m.model_id, m.provider_id) == ("model:switch", "msg_2", "gpt", "oa")


def test_permission_fields() -> None:
    source = {"type": "tool", "messageID": "msg_M", "callID": "call_7"}
    asked = ev(
        "permission.v2.asked",
        {"id": "per_1", "action": "bash", "resources": ["touch x"], "source": source},
        seq=None,
    )
    replied = ev("permission.v2.replied", {"requestID": "per_1", "reply": "once"}, seq=None)
    assert (asked.request_id, asked.action, asked.assistant_message_id, asked.call_id) == (
        "per_1",
        "bash",
        "msg_M",
        "call_7",
    )
    assert (replied.kind, replied.request_id, replied.reply) == ("permission:replied", "per_1", "once")


def test_timestamp_must_be_an_int_not_a_bool_nor_an_iso_string() -> None:
    assert ev("session.next.prompted", {"timestamp": 5}).timestamp_ms == 5
    assert ev("session.next.prompted", {"timestamp": True}).timestamp_ms is None
    assert ev("session.next.prompted", {"timestamp": "2026-11-30T02:15:21.966Z"}).timestamp_ms is None
    assert ev("session.next.prompted", {"timestamp": 5.5}).timestamp_ms is None


@pytest.mark.parametrize(
    "data",
    [
        {"tokens": [1, 2, 3], "cost": "0.1", "finish": 1},
        {"tokens": {"input": True, "output": "10", "reasoning": 1.5, "cache": [1]}, "cost": False},
        {"tokens": None, "cost": None, "finish": None},
        {"tokens": {"cache": {"read": None, "write": {}}}},
    ],
)
def test_wrong_shaped_step_fields_yield_none(data: dict[str, Any]) -> None:
    e = ev("session.next.step.ended", data)
    assert e.kind == "step:end"
    assert (e.finish, e.cost, e.tokens_input, e.tokens_output, e.tokens_reasoning) == (None,) * 5
    assert (e.tokens_cache_read, e.tokens_cache_write) == (None, None)


def test_float_cost_is_kept() -> None:
    assert ev("session.next.step.ended", {"cost": 0.0123}).cost == 0.0123


def test_an_integer_beyond_a_double_is_no_number_not_a_crash() -> None:
    # JSON integers have no size limit; float(10**400) raises OverflowError, which is no BadFrame.
    # (Integer columns beyond bigint are stored as NULL by the store: bridge.store.writes.rows.)
    assert ev("session.next.step.ended", {"cost": 10**400}).cost is None
    assert ev("session.next.step.ended", {"cost": -(10**400)}).cost is None
    assert ev("session.next.step.ended", {"cost": 2**1022}).cost == float(2**1022)


def test_wrong_shaped_ids_and_texts_yield_none() -> None:
    e = ev(
        "session.next.text.ended",
        {"assistantMessageID": 1, "textID": ["t"], "text": {"x": 1}, "messageID": None},
    )
    assert (e.assistant_message_id, e.part_id, e.text, e.message_id) == (None, None, None, None)
    p = ev("session.next.prompted", {"prompt": "just a string", "delivery": 3})
    assert (p.text, p.delivery) == (None, None)
    s = ev("session.next.step.started", {"model": "mock-1", "agent": ["build"]})
    assert (s.model_id, s.provider_id, s.agent) == (None, None, None)


def test_missing_data_does_not_crash_normalize() -> None:
    e = normalize(
        parse_frame(json.dumps({"id": "e", "type": "session.next.step.failed", "durable": {"seq": 4}}))
    )
    assert (e.kind, e.seq, e.error_type, e.error_message, e.envelope.session_id) == (
        "step:fail",
        4,
        None,
        "Error",
        None,
    )


# --- the error envelope ------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", ["session.next.step.failed", "session.next.tool.failed"])
def test_historical_unknown_error_type_is_valid_and_message_is_the_display_text(event_type: str) -> None:
    e = ev(event_type, {"error": {"type": "unknown", "message": "Provider turn interrupted"}})
    assert (e.error_type, e.error_message) == ("unknown", "Provider turn interrupted")


def test_future_error_type_and_message_are_kept_as_is() -> None:
    e = ev("session.next.step.failed", {"error": {"type": "ProviderRateLimited", "message": "Slow down"}})
    assert (e.error_type, e.error_message) == ("ProviderRateLimited", "Slow down")


def test_extra_error_fields_stay_in_raw_and_are_ignored() -> None:
    error = {"type": "api", "message": "m", "statusCode": 429, "retryable": True, "metadata": {"a": [1]}}
    e = ev("session.next.step.failed", {"error": error})
    assert (e.error_type, e.error_message) == ("api", "m")
    assert e.envelope.raw["data"]["error"] == error


@pytest.mark.parametrize("message", [None, 42, ["m"], {"text": "m"}, True])
def test_missing_or_non_string_message_gets_the_generic_fallback(message: object) -> None:
    error: dict[str, Any] = {"type": "unknown"}
    if message is not None:
        error["message"] = message
    e = ev("session.next.tool.failed", {"error": error})
    assert (e.error_type, e.error_message) == ("unknown", "Error (unknown)")


@pytest.mark.parametrize("error", ["boom", None, 5, [], {}, {"type": 7, "message": None}])
def test_wrong_shaped_error_does_not_crash_and_gets_a_fallback(error: object) -> None:
    e = ev("session.next.step.failed", {"error": error})
    assert (e.error_type, e.error_message) == (None, "Error")


def test_fallback_is_bounded_even_for_a_huge_error_type() -> None:
    e = ev("session.next.step.failed", {"error": {"type": "X" * 10_000}})
    assert e.error_type == "X" * 10_000  # the type itself is kept whole
    assert e.error_message is not None and len(e.error_message) <= ERROR_FALLBACK_MAX
    assert e.error_message.startswith("Error (X")
    assert len(error_fallback("Y" * 500)) <= ERROR_FALLBACK_MAX


def test_a_real_message_is_never_truncated_and_never_interpreted() -> None:
    long = "Provider request failed with HTTP 429: " + "x" * 100_000
    e = ev("session.next.step.failed", {"error": {"type": "unknown", "message": long}})
    assert e.error_message == long
    # Same type, message text that looks like a status: still just display text.
    other = ev("session.next.step.failed", {"error": {"type": "unknown", "message": "interrupted"}})
    assert (other.kind, other.error_type) == (e.kind, e.error_type)


def test_empty_message_string_is_kept_since_it_is_a_string() -> None:
    assert ev("session.next.step.failed", {"error": {"type": "t", "message": ""}}).error_message == ""


def test_error_fields_are_only_read_for_failure_kinds() -> None:
    e = ev("session.next.step.ended", {"error": {"type": "unknown", "message": "m"}})
    assert (e.error_type, e.error_message) == (None, None)


# --- to_json -----------------------------------------------------------------------------------------


def test_to_json_has_the_identity_keys_and_only_non_none_fields() -> None:
    e = ev(
        "session.next.text.ended",
        {"assistantMessageID": "msg_M", "textID": "text-0", "text": "Hi", "timestamp": 9},
        seq=5,
    )
    assert to_json(e) == {
        "kind": "text:end",
        "seq": 5,
        "event_id": "evt_1",
        "type": "session.next.text.ended",
        "session_id": SES,
        "timestamp_ms": 9,
        "assistant_message_id": "msg_M",
        "part_id": "text-0",
        "text": "Hi",
    }


def test_to_json_keeps_seq_and_session_keys_when_absent() -> None:
    view = to_json(normalize(parse_frame('{"id":"evt_c","type":"server.connected","data":{}}')))
    assert view == {
        "kind": "server:connected",
        "seq": None,
        "event_id": "evt_c",
        "type": "server.connected",
        "session_id": None,
    }


def test_chat_event_identity_properties() -> None:
    env = Envelope("evt_9", "t", 3, 1, SES, SES, {}, {})
    e = ChatEvent(envelope=env, kind="unknown")
    assert (e.seq, e.event_id, e.type) == (3, "evt_9", "t")
