"""normalize_legacy / LegacyTurnState: the once rule, seeding, the error envelope, unknown shapes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.events import KINDS, NOISE, ChatEvent, Envelope, to_json
from bridge.events.legacy import legacy_error, normalize_legacy
from bridge.events.legacy_shapes import session_status, session_title, tool_call
from bridge.events.legacy_state import LEGACY_TYPES, PART_UPDATED, STEP_END, TEXT_END, TOOL_SUCCESS, LegacyTurnState

SES = "ses_A"
_n = 0


def env(event_type: str, data: dict[str, Any], event_id: str | None = None) -> Envelope:
    global _n
    _n += 1
    data = {"sessionID": SES, **data}
    return Envelope(event_id or f"evt_{_n}", event_type, None, None, None, SES, data, {"data": data})


def user(msg: str = "msg_U") -> Envelope:
    return env("message.updated", {"info": {"id": msg, "role": "user", "time": {"created": 1},
                                            "model": {"providerID": "p", "modelID": "m"}}})


def assistant(msg: str = "msg_A", **info: Any) -> Envelope:
    return env("message.updated", {"info": {"id": msg, "role": "assistant", "parentID": "msg_U",
                                            "modelID": "m", "providerID": "p", "agent": "build",
                                            "time": {"created": 2}, **info}})


def part(part_type: str, part_id: str = "prt_1", msg: str = "msg_A", **fields: Any) -> Envelope:
    return env("message.part.updated", {"part": {"id": part_id, "messageID": msg, "type": part_type, **fields},
                                        "time": 5})


def tool(status: str, **state: Any) -> Envelope:
    return part("tool", "prt_T", callID="call_1", tool="bash", state={"status": status, **state})


def kinds(envs: list[Envelope], state: LegacyTurnState | None = None) -> list[str]:
    state = LegacyTurnState() if state is None else state
    return [normalize_legacy(e, state).kind for e in envs]


def row(e: ChatEvent) -> dict[str, Any]:
    return {"event_id": e.event_id, "kind": e.kind, "part_id": e.part_id, "message_id": e.message_id,
            "assistant_message_id": e.assistant_message_id}


# --- kinds -------------------------------------------------------------------------------------------


def test_kind_constants_are_the_v2_kind_strings() -> None:
    assert (TEXT_END, TOOL_SUCCESS, STEP_END, PART_UPDATED) == (
        "text:end", "tool:success", "step:end", "legacy:part-updated"
    )


def test_a_whole_turn_maps_to_v2_kinds() -> None:
    turn = [
        user(),
        part("text", "prt_P", "msg_U", text="hi"),
        assistant(),
        part("step-start", "prt_S"),
        part("text", "prt_X", text="", time={"start": 1}),
        part("text", "prt_X", text="Hel", time={"start": 1}),
        part("text", "prt_X", text="Hello", time={"start": 1, "end": 2}),
        part("reasoning", "prt_R", text="hm", time={"start": 1, "end": 2}),
        tool("pending", input={}),
        tool("running", input={"command": "ls"}),
        tool("running", input={"command": "ls"}, metadata={"output": "a"}),
        tool("completed", input={"command": "ls"}, output="a\n"),
        part("step-finish", "prt_F", reason="stop", cost=0.5,
             tokens={"total": 3, "input": 1, "output": 2, "reasoning": 0, "cache": {"read": 4, "write": 5}}),
        assistant(finish="stop"),
        part("patch", "prt_Q", hash="h", files=[]),
    ]
    assert kinds(turn) == [
        "legacy:message-updated", "prompt:admitted", "step:start", "legacy:part-updated",
        "text:start", "legacy:part-updated", "text:end", "reasoning:end",
        "tool:input-start", "tool:start", "legacy:part-updated", "tool:success",
        "step:end", "legacy:message-updated", "patch",  # a patch part is its own kind (upstream §20)
    ]
    assert all(k in {str(x) for x in KINDS} for k in kinds(turn))


def test_step_end_carries_finish_tokens_and_cost() -> None:
    e = normalize_legacy(part("step-finish", reason="tool-calls", cost=0,
                              tokens={"input": 100, "output": 10, "reasoning": 1, "cache": {"read": 2, "write": 3}}),
                         LegacyTurnState())
    assert (e.kind, e.finish, e.cost, e.assistant_message_id, e.part_id) == ("step:end", "tool-calls", 0.0,
                                                                             "msg_A", "prt_1")
    assert (e.tokens_input, e.tokens_output, e.tokens_reasoning, e.tokens_cache_read, e.tokens_cache_write) == (
        100, 10, 1, 2, 3)


def test_step_start_carries_agent_model_and_parent() -> None:
    e = normalize_legacy(assistant(), LegacyTurnState())
    assert (e.kind, e.agent, e.model_id, e.provider_id, e.message_id, e.assistant_message_id, e.timestamp_ms) == (
        "step:start", "build", "m", "p", "msg_U", "msg_A", 2)
    assert e.cost is None and e.finish is None  # totals stay on step:end only, never summed twice


def test_prompt_is_the_text_part_of_a_user_message() -> None:
    state = LegacyTurnState()
    kinds([user()], state)
    e = normalize_legacy(part("text", "prt_P", "msg_U", text="do it"), state)
    assert (e.kind, e.text, e.message_id, e.assistant_message_id) == ("prompt:admitted", "do it", "msg_U", None)
    again = normalize_legacy(part("text", "prt_P", "msg_U", text="do it"), state)
    assert again.kind == "legacy:part-updated"


# --- the once rule -----------------------------------------------------------------------------------


def test_a_tool_seen_first_as_completed_succeeds_once_and_never_starts_afterwards() -> None:
    assert kinds([tool("completed", output="x"), tool("running"), tool("pending"), tool("completed")]) == [
        "tool:success", "legacy:part-updated", "legacy:part-updated", "legacy:part-updated"]


def test_a_text_seen_first_as_ended_ends_once_and_never_starts_afterwards() -> None:
    def ended() -> Envelope:
        return part("text", "prt_X", text="all", time={"start": 1, "end": 2})

    assert kinds([ended(), part("text", "prt_X", text="", time={"start": 1}), ended()]) == [
        "text:end", "legacy:part-updated", "legacy:part-updated"]


def test_failure_after_start_and_error_tool() -> None:
    state = LegacyTurnState()
    failed = normalize_legacy(tool("error", error="boom"), state)
    assert (failed.kind, failed.error_type, failed.error_message, failed.call_id, failed.tool_name) == (
        "tool:fail", None, "boom", "call_1", "bash")
    step = kinds([assistant("msg_B"), assistant("msg_B", error={"name": "MessageAbortedError",
                                                                   "data": {"message": "Aborted"}}),
                  assistant("msg_B", error={"name": "X", "data": {"message": "again"}})], state)
    assert step == ["step:start", "step:fail", "legacy:message-updated"]


def test_mapping_the_same_event_again_gives_the_same_kind() -> None:
    state = LegacyTurnState()
    events = [tool("pending"), tool("running"), tool("completed", output="x")]
    first = kinds(events, state)
    assert kinds(list(reversed(events)), state) == list(reversed(first))


def test_a_seeded_state_knows_what_was_emitted_and_by_which_event() -> None:
    events = [user(), part("text", "prt_P", "msg_U", text="q"), assistant(),
              part("text", "prt_X", text="", time={"start": 1}),
              part("text", "prt_X", text="done", time={"start": 1, "end": 2})]
    state = LegacyTurnState()
    rows = [row(normalize_legacy(e, state)) for e in events]
    seeded = LegacyTurnState.from_rows(rows)
    assert kinds(events, seeded) == [r["kind"] for r in rows]  # the stored events map as they were stored
    assert kinds([part("text", "prt_X", text="done", time={"start": 1, "end": 2}),
                  part("text", "prt_P2", "msg_U", text="more")], seeded) == ["legacy:part-updated",
                                                                              "prompt:admitted"]
    delta = normalize_legacy(env("message.part.delta", {"messageID": "msg_A", "partID": "prt_X", "field": "text",
                                                        "delta": "d"}), seeded)
    assert (delta.kind, delta.text, delta.part_id) == ("delta:text", "d", "prt_X")


def test_seeding_ignores_rows_it_cannot_use() -> None:
    state = LegacyTurnState.from_rows([{}, {"kind": None}, {"kind": "text:end", "part_id": 5, "event_id": "e"},
                                       {"kind": "text:end", "part_id": "p", "event_id": None},
                                       {"kind": "step:start", "assistant_message_id": "msg_v2", "event_id": "e"}])
    assert state.emitted == {("msg_v2", "step:start"): "e"}


# --- errors, unknowns, live-only events --------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"name": "APIError", "data": {"message": "Rate limited", "statusCode": 429}}, ("APIError", "Rate limited")),
        ({"name": "MessageAbortedError", "data": {}}, ("MessageAbortedError", "Error (MessageAbortedError)")),
        ({"name": "unknown", "data": {"message": 5}}, ("unknown", "Error (unknown)")),
        ({"type": "api", "message": "m"}, ("api", "m")),
        ("boom", (None, "Error")),
        (None, (None, "Error")),
        ({"name": 7, "data": []}, (None, "Error")),
    ],
)
def test_a_legacy_error_keeps_its_name_as_type_and_data_message_as_message(
    error: object, expected: tuple[str | None, str]
) -> None:
    assert legacy_error(error) == expected


def test_session_error_goes_through_the_open_envelope() -> None:
    e = normalize_legacy(env("session.error", {"error": {"name": "ProviderAuthError",
                                                         "data": {"message": "no key"}}}), LegacyTurnState())
    assert (e.kind, e.error_type, e.error_message) == ("legacy:session-error", "ProviderAuthError", "no key")


def test_unknown_part_and_event_types_are_kept_as_unknown() -> None:
    state = LegacyTurnState()
    assert kinds([part("future-part"), part(""), env("message.part.updated", {"part": {"id": "p", "type": 3}}),
                  env("brand.new", {"messageID": "m"})], state) == ["unknown"] * 4
    assert normalize_legacy(env("project.updated", {"id": "x"}), state).kind == NOISE


def test_a_delta_of_an_unannounced_part_stays_a_legacy_delta() -> None:
    e = normalize_legacy(env("message.part.delta", {"partID": "prt_Z", "delta": "x"}), LegacyTurnState())
    assert (e.kind, e.text) == ("legacy:part-delta", "x")


def test_legacy_permissions_map_to_permission_kinds() -> None:
    state = LegacyTurnState()
    asked = normalize_legacy(env("permission.asked", {"id": "per_1", "permission": "bash", "patterns": ["x"],
                                                      "tool": {"messageID": "msg_A", "callID": "call_1"}}), state)
    replied = normalize_legacy(env("permission.replied", {"requestID": "per_1", "reply": "always"}), state)
    assert (asked.kind, asked.request_id, asked.action, asked.assistant_message_id, asked.call_id) == (
        "permission:asked", "per_1", "bash", "msg_A", "call_1")
    assert (replied.kind, replied.request_id, replied.reply) == ("permission:replied", "per_1", "always")


def test_views_of_status_title_and_tool_call() -> None:
    retry = session_status(env("session.status", {"status": {"type": "retry", "attempt": 2, "message": "slow",
                                                             "next": 99}}))
    assert retry is not None and (retry.type, retry.attempt, retry.message, retry.next_ms) == ("retry", 2, "slow", 99)
    assert session_status(env("session.status", {"status": "busy"})) is None
    assert session_status(env("session.idle", {})) is None
    assert session_title(env("session.updated", {"info": {"title": "T"}})) == "T"
    call = tool_call(tool("completed", input={"a": 1}, output="o", title="t"))
    assert call is not None and (call.status, call.input, call.output, call.title) == ("completed", {"a": 1}, "o", "t")
    assert tool_call(part("text")) is None


# --- fuzz --------------------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_keys = ["info", "part", "time", "id", "role", "parentID", "type", "text", "state", "status", "error", "name",
         "data", "message", "tokens", "cost", "reason", "callID", "tool", "messageID", "partID", "delta",
         "permission", "requestID", "reply", "input", "output", "end", "cache", "input"]
_shaped = st.recursive(_json, lambda inner: st.dictionaries(st.sampled_from(_keys), inner, max_size=5),
                       max_leaves=14)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(LEGACY_TYPES)), st.dictionaries(st.sampled_from(_keys), _shaped,
                                                                                  max_size=4)), max_size=6),
       st.integers(min_value=-(10**400), max_value=10**400))
def test_normalize_legacy_never_raises_on_wrong_shaped_data(events: list[tuple[str, dict[str, Any]]],
                                                            big: int) -> None:
    state = LegacyTurnState()
    known = {str(k) for k in KINDS} | {NOISE}
    for event_type, data in [*events, ("message.part.updated", {"part": {"id": "p", "type": "step-finish",
                                                                         "cost": big}})]:
        e = normalize_legacy(env(event_type, data), state)
        assert e.kind in known
        to_json(e)
        assert e.cost is None or type(e.cost) is float
    state.seed([row(normalize_legacy(env(t, d), state)) for t, d in events])
