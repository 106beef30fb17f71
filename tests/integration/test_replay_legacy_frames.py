"""Legacy rows framed by PostgreSQL (bridge.store.reads.replay_legacy) are the frames Python builds from the
stored rows (`bridge.fanout.protocol.event_frames`): every legacy kind of every captured legacy session and
of the captured sync log, and the odd shapes a stored legacy payload may have. Each test also says which
rows PostgreSQL framed, so a shape falling back to Python unnoticed fails here."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import pool
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bridge.events import ChatEvent, Kind
from bridge.events.kinds import PART_KINDS
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.stored import is_legacy_payload
from bridge.events.syncframes import parse_sync_item
from bridge.fanout import protocol as p
from bridge.store.db import to_async_url
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from tests.conftest import run_sync
from tests.support.chat_events import RECEIVED_AT
from tests.support.legacy_rows import STORES, legacy_session, x9_sync_log


async def framed(engine: AsyncEngine, store: EventStore, sid: str, events: list[ChatEvent]) -> dict[int, bool]:
    """Store `events`, check every replay frame against Python's; {seq: framed by PostgreSQL} of legacy rows."""
    epoch, _ = await store.claim(sid, "owner-1")
    await store.write_batch(sid, epoch, events, RECEIVED_AT)
    fan = FanoutStore(engine, store.upstream)
    rows = await fan.frames_after(sid, 0, 10_000)
    python = p.event_frames(sid, await fan.events_after(sid, 0, 10_000))
    built = p.replay_frames(sid, rows)
    assert len(built) == len(python) == len({e.seq for e in events})
    for (seq, want), (bseq, got) in zip(python, built, strict=True):
        assert bseq == seq
        assert json.loads(got) == json.loads(want), (sid, seq, got, want)
    legacy = {e.seq for e in events if is_legacy_payload(e.envelope.raw)}
    return {seq: frame is not None for seq, frame, _payload, _kind in rows if seq in legacy}


def _content_part(ev: ChatEvent) -> bool:
    part = ev.data.get("part")
    return isinstance(part, dict) and (part.get("type") in PART_KINDS or part.get("synthetic") is True)


@pytest.mark.parametrize("scenario", [*sorted(STORES), "x9-sync-history"])
async def test_captured_legacy_rows_are_framed_by_postgresql(
    store: EventStore, engine: AsyncEngine, scenario: str
) -> None:
    sid, events = x9_sync_log() if scenario == "x9-sync-history" else legacy_session(scenario)
    events = [e for e in events if e.seq is not None]
    by_sql = await framed(engine, store, sid, events)
    # Every legacy row but a content part (file, patch, synthetic text …: framed in Python) comes framed.
    for ev in events:
        if ev.seq in by_sql:
            assert by_sql[ev.seq] is not _content_part(ev), (scenario, ev.seq, ev.kind)
    kinds = {e.kind for e in events if e.seq is not None and by_sql.get(e.seq)}
    assert {Kind.LEGACY_MESSAGE_UPDATED, Kind.STEP_START, Kind.PROMPT_ADMITTED, Kind.SESSION_UPDATED} <= kinds


def _item(seq: int, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"evt_odd{seq:03d}", "aggregate_id": "ses_legacy_odd", "seq": seq, "type": f"{type_}.1",
            "data": {"sessionID": "ses_legacy_odd", **data}}


def _msg(info: Any) -> tuple[str, dict[str, Any]]:
    return "message.updated", {"info": info}


def _part(part: Any, time: Any = 1_796_000_000_123) -> tuple[str, dict[str, Any]]:
    return "message.part.updated", {"part": part, "time": time}


def _tool(status: str, **state: Any) -> dict[str, Any]:
    return {"id": f"prt_t_{status}_{len(state)}", "messageID": "msg_a", "type": "tool", "callID": "call_1",
            "tool": "bash", "state": {"status": status, **state}}


_LONG = "E" * 300
# (type, data, stored kind: None = as mapped in order, else the kind the row is stored with).
ODD: list[tuple[str, dict[str, Any], str | None]] = [
    (*_msg({"id": "msg_u", "role": "user", "agent": "build", "time": {"created": 5},
            "model": {"providerID": "p", "modelID": "m"}}), None),
    (*_part({"id": "prt_u", "messageID": "msg_u", "type": "text", "text": "hi"}), None),  # the prompt
    (*_part({"id": "prt_u", "messageID": "msg_u", "type": "text", "text": "hi"}), Kind.LEGACY_PART_UPDATED),
    (*_msg({"id": "msg_a", "role": "assistant", "parentID": "msg_u", "modelID": "m", "providerID": "p",
            "time": {"created": 6, "completed": True}}), None),
    (*_msg({"id": "msg_f", "role": "assistant", "error": {"name": _LONG}}), None),  # no message: the fallback
    (*_msg({"id": "msg_g", "role": "assistant", "error": {"type": "v2ish", "message": "m"}}), None),
    (*_msg({"id": "msg_h", "role": "assistant", "error": {"name": "X", "data": {"message": "boom"}}}),
     Kind.LEGACY_MESSAGE_UPDATED),
    (*_msg("not an object"), None),
    (*_msg({"role": "assistant", "time": {"created": 1.5}}), None),  # no id
    (*_part({"id": "prt_t", "messageID": "msg_a", "type": "text", "text": "t", "time": {"end": 2.5}}), None),
    (*_part({"id": "prt_e", "messageID": "msg_a", "type": "text", "text": "final", "time": {"end": 9}}), None),
    (*_part({"id": "prt_e", "messageID": "msg_a", "type": "text", "text": "final", "time": {"end": 9}}),
     Kind.LEGACY_PART_UPDATED),
    (*_part({"id": "prt_n", "messageID": "msg_a", "type": "reasoning", "text": 5, "time": {"end": 9}}), None),
    (*_part({"id": "prt_z", "messageID": "msg_a", "type": "text", "text": "nul \u0000 here", "time": {"end": 1}}),
     None),
    (*_part(_tool("error", error={"name": "ToolError", "data": {"message": "no"}}, time={"start": 1, "end": 40},
                  input={"command": "ls"})), None),
    (*_part(_tool("error")), None),  # no error at all: "Error"
    (*_part(_tool("error", error="bare string", time={})), None),
    (*_part(_tool("completed", output=7, input=None, metadata={"sessionId": "ses_child"},
                  time={"start": 1, "end": 2.5})), None),
    (*_part(_tool("completed", output="out", metadata={"sessionId": 3}, time={"start": 10, "end": 25})), None),
    (*_part(_tool("running")), None),  # no input
    (*_part(_tool("weird", metadata={"sessionId": "ses_child2"})), None),
    (*_part({**_tool("running", input={"a": 1}), "state": "not an object"}), None),
    (*_part({"id": "prt_s", "messageID": "msg_a", "type": "step-finish", "reason": "stop", "cost": 0,
             "tokens": {"input": 1.0, "output": 2, "reasoning": True, "cache": {"read": 10**30}}}), None),
    (*_part({"id": "prt_s2", "messageID": "msg_a", "type": "step-finish", "cost": 10**400, "tokens": "no"}),
     None),
    (*_part({"id": "prt_s3", "messageID": "msg_a", "type": "step-finish", "cost": 0.25}), Kind.TEXT_START),
    (*_part({"id": "prt_s4", "messageID": "msg_a", "type": "step-finish", "cost": 12_345_678_901.5}), None),
    (*_part({"id": "prt_p", "messageID": "msg_a", "type": "snapshot"}, time="not a number"), None),
    (*_part({"id": "prt_w", "messageID": "msg_a", "type": "weird"}), None),
    (*_part({"messageID": "msg_a", "type": "text", "text": "no id"}), None),
    # Strings printed as stored (escapes of every kind) and integers told by their printed digits: an
    # exponent stored as plain digits is an integer, a negative one too, a small exponent is a float.
    (*_msg({"id": "msg_q", "role": "assistant", "parentID": "msg_u", "agent": "a\"b\\c\u0001\u2028\U0001F600/",
            "modelID": "m\n", "providerID": "p\t", "time": {"created": -5, "completed": 1e21}}), None),
    (*_part({"id": "prt_x", "messageID": "msg_a", "type": "text", "text": "x\"\\\u001f", "time": {"end": 1e3}},
            time=-7), None),
    (*_part({"id": "prt_s5", "messageID": "msg_a", "type": "step-finish", "reason": "\u00e9\b", "cost": 1e-7,
             "tokens": {"input": 2e2, "output": -3, "reasoning": 1.5e-3, "cache": {"read": 0, "write": 1e0}}}), None),
    ("session.updated", {"info": {"title": "T", "parentID": "ses_p", "revert": {"messageID": "msg_u"},
                                  "time": {"updated": 77}}}, None),
    ("session.updated", {"info": {"revert": {}, "time": {"updated": "later"}}}, None),
    ("session.updated", {"info": ["not", "an", "object"]}, None),
    # Re-sends of another type (hand-edited kinds): a child session read from `data`, as content_fields does.
    ("session.updated", {"info": {"title": "T2"}, "state": {"metadata": {"sessionId": "ses_c3"}}},
     Kind.LEGACY_PART_UPDATED),
    (*_msg({"id": "msg_u2", "role": "user"}), Kind.LEGACY_PART_UPDATED),
]
# Framed in Python (no SQL for these shapes): an unknown part type, a part without an id, a stored kind
# that is neither the payload's milestone nor a re-send.
IN_PYTHON = {"prt_s3", "prt_w", None}


async def test_odd_legacy_rows_replay_as_the_python_frame(store: EventStore, engine: AsyncEngine) -> None:
    state, events = LegacyTurnState(), []
    for i, (type_, data, kind) in enumerate(ODD):
        ev = normalize_legacy(parse_sync_item(_item(i + 1, type_, data)), state)
        events.append(ev if kind is None else replace(ev, kind=cast(Kind, kind)))
    by_sql = await framed(engine, store, "ses_legacy_odd", events)
    part_ids = {e.seq: e.data["part"].get("id") for e in events if isinstance(e.data.get("part"), dict)}
    assert {part_ids.get(seq, "-") for seq, sql in by_sql.items() if not sql} == IN_PYTHON
    assert sum(not sql for sql in by_sql.values()) == len(IN_PYTHON)


# Generated legacy rows: the shapes the mapping reads, with every leaf of every type, and stored kinds that
# are the milestone, a re-send or anything else (framed in Python then): PostgreSQL's frame is Python's.
_leaf = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
                  st.floats(allow_nan=False, allow_infinity=False),
                  st.text(max_size=5).filter(lambda t: "\x00" not in t),
                  st.sampled_from(["assistant", "user", "text", "tool", "completed", "error", "running", "pending"]))
_any = st.recursive(_leaf, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                  st.dictionaries(st.sampled_from(["id", "text", "name"]), kids,
                                                                  max_size=2)), max_leaves=4)


def _maybe(keys: dict[str, Any]) -> Any:
    return st.fixed_dictionaries({}, optional={k: v for k, v in keys.items()})


_time = _maybe({"created": _any, "completed": _any, "updated": _any, "start": _any, "end": _any})
_error = st.one_of(_any, _maybe({"name": _any, "type": _any, "message": _any, "data": _maybe({"message": _any})}))
_info = _maybe({"id": st.one_of(st.sampled_from(["msg_u", "msg_a"]), _any), "role": st.one_of(
    st.sampled_from(["user", "assistant"]), _any), "parentID": _any, "agent": _any, "modelID": _any,
    "providerID": _any, "model": _maybe({"modelID": _any, "providerID": _any}), "time": _time, "error": _error,
    "title": _any, "revert": st.one_of(_any, _maybe({"messageID": _any, "partID": _any}))})
_part = _maybe({"id": st.one_of(st.sampled_from(["prt_1", "prt_2"]), _any),
                "messageID": st.one_of(st.sampled_from(["msg_u", "msg_a"]), _any),
                "type": st.one_of(st.sampled_from(["text", "reasoning", "tool", "step-finish", "step-start",
                                                   "snapshot", "patch", "weird"]), _any),
                "text": _any, "synthetic": _any, "time": _time, "callID": _any, "tool": _any, "reason": _any,
                "cost": _any, "tokens": _maybe({"input": _any, "output": _any, "cache": _maybe({"read": _any})}),
                "state": _maybe({"status": st.one_of(st.sampled_from(["pending", "running", "completed", "error"]),
                                                     _any), "input": _any, "output": _any, "error": _error,
                                 "time": _time, "metadata": _maybe({"sessionId": _any})})})
_row = st.one_of(
    st.tuples(st.just("message.updated"), _maybe({"info": _info})),
    st.tuples(st.just("message.part.updated"), _maybe({"part": _part, "time": _any})),
    st.tuples(st.just("session.updated"), _maybe({"info": _info, "state": _any})),
)
_KINDS = [None, None, None, Kind.LEGACY_PART_UPDATED, Kind.LEGACY_MESSAGE_UPDATED, Kind.PROMPT_ADMITTED,
          Kind.TEXT_END, Kind.TOOL_SUCCESS, Kind.STEP_END, Kind.SESSION_UPDATED, "not-a-kind"]


async def _generated(database_url: str, rows: list[tuple[str, dict[str, Any], str | None]]) -> None:
    engine = create_async_engine(to_async_url(database_url), poolclass=pool.NullPool)
    try:
        store = EventStore(engine, f"gen-{uuid.uuid4().hex[:8]}")
        state, events = LegacyTurnState(), []
        for i, (type_, data, kind) in enumerate(rows):
            ev = normalize_legacy(parse_sync_item(_item(i + 1, type_, data)), state)
            events.append(ev if kind is None else replace(ev, kind=cast(Kind, kind)))
        await framed(engine, store, "ses_legacy_odd", events)
    finally:
        await engine.dispose()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_row, st.sampled_from(_KINDS)), min_size=1, max_size=30))
def test_generated_legacy_rows_replay_as_the_python_frame(database_url: str, rows: list[Any]) -> None:
    run_sync(_generated(database_url, [(t, d, k) for (t, d), k in rows]))
