"""The legacy mapping over every legacy-driven capture: each turn rebuilt from the mapped events equals
the legacy message store (`GET /session/{id}/message`) of that capture; milestones come once, from any
source (legacy /event, /global/event twins, the sync log), and after a restart from seeded state."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bridge.events import ChatEvent, Envelope, normalize, parse_envelope
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_shapes import tool_call
from bridge.events.legacy_state import SEED_KINDS, LegacyTurnState
from bridge.events.syncframes import parse_global_frame, parse_sync_log
from bridge.upstream.sse import SSEEvent, SSEParser
from tests.support.legacy_rows import legacy_frame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"

# Every capture with a legacy message store, and the store file to rebuild.
STORES = {
    "l-legacy-prompt": "06-legacy-messages.json",
    "l2-legacy-provider-retry": "07-legacy-messages.json",
    "x1-legacy-tool-turn": "04-legacy-messages.json",
    "x2-legacy-reasoning": "03-legacy-messages.json",
    "x3-legacy-sync-message": "03-legacy-messages.json",
    "x5-legacy-permission": "06-legacy-messages.json",
    "x8-legacy-client-message-id": "04-legacy-messages.json",
}
PERSISTED_LEGACY = ("message.updated", "message.part.updated", "session.updated")
END_KINDS = ("text:end", "reasoning:end", "tool:success", "tool:fail", "step:end", "prompt:admitted")


def sse_data(path: Path) -> list[str]:
    parser = SSEParser()
    items = parser.feed(path.read_bytes()) + parser.close()
    return [i.data for i in items if isinstance(i, SSEEvent)]


def store(name: str) -> tuple[str, list[dict[str, Any]]]:
    exchange = json.loads((FIXTURES / name / STORES[name]).read_text())
    session_id = exchange["request"]["path"].split("/")[2]
    return session_id, exchange["response"]["body"]


@cache
def legacy_stream(name: str, session_id: str) -> tuple[Envelope, ...]:
    envs = (legacy_frame(d) for d in sse_data(FIXTURES / name / "legacy.sse"))
    return tuple(e for e in envs if e.session_id == session_id)


@cache
def x9_sync_log() -> tuple[Envelope, ...]:
    body = json.loads((FIXTURES / "x9-sync-history" / "04-sync-history-sid-0.json").read_text())
    items = parse_sync_log(body["response"]["body"])
    assert all(isinstance(e, Envelope) for e in items)
    return tuple(e for e in items if isinstance(e, Envelope))


def mapped(envs: Iterable[Envelope], state: LegacyTurnState | None = None) -> list[ChatEvent]:
    state = LegacyTurnState() if state is None else state
    return [normalize_legacy(e, state) for e in envs]


# --- rebuilding turns --------------------------------------------------------------------------------

Turns = dict[str, dict[str, Any]]


def _tokens(t: Any) -> tuple[Any, ...]:
    cache_ = t.get("cache", {})
    return (t.get("input"), t.get("output"), t.get("reasoning"), cache_.get("read"), cache_.get("write"))


def turns_of_store(messages: list[dict[str, Any]]) -> Turns:
    turns: Turns = {}
    for m in messages:
        info, parts = m["info"], m["parts"]
        if info["role"] == "user":
            turns[info["id"]] = {"prompt": [p["text"] for p in parts if p["type"] == "text"], "steps": {}}
            continue
        step: dict[str, Any] = {"texts": [], "reasoning": [], "tools": [], "finish": None, "tokens": None,
                                "cost": None, "error": None}
        for p in parts:
            if p["type"] in ("text", "reasoning"):
                step["texts" if p["type"] == "text" else "reasoning"].append(p["text"])
            elif p["type"] == "tool":
                s = p["state"]
                step["tools"].append((p["callID"], p["tool"], s["status"], s.get("input"), s.get("output"),
                                      s.get("error")))
            elif p["type"] == "step-finish":
                step.update(finish=p["reason"], tokens=_tokens(p["tokens"]), cost=p["cost"])
        if "error" in info:
            step["error"] = (info["error"]["name"], info["error"]["data"]["message"])
        turns[info["parentID"]]["steps"][info["id"]] = step
    return turns


def turns_of_events(events: Iterable[ChatEvent]) -> Turns:
    turns: Turns = {}
    steps: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.type.startswith("session.next."):  # l-legacy-prompt: a v2 turn follows, not in the legacy store
            continue
        if e.kind == "prompt:admitted":
            turns.setdefault(str(e.message_id), {"prompt": [], "steps": {}})["prompt"].append(e.text)
        elif e.kind == "step:start":
            steps[str(e.assistant_message_id)] = turns[str(e.message_id)]["steps"].setdefault(
                str(e.assistant_message_id),
                {"texts": [], "reasoning": [], "tools": [], "finish": None, "tokens": None, "cost": None,
                 "error": None},
            )
        elif e.kind in ("text:end", "reasoning:end"):
            steps[str(e.assistant_message_id)]["texts" if e.kind == "text:end" else "reasoning"].append(e.text)
        elif e.kind in ("tool:success", "tool:fail"):
            call = tool_call(e.envelope)
            assert call is not None
            error = e.error_message if e.kind == "tool:fail" else None
            steps[str(e.assistant_message_id)]["tools"].append(
                (e.call_id, e.tool_name, call.status, call.input, call.output, error)
            )
        elif e.kind == "step:end":
            tokens = (e.tokens_input, e.tokens_output, e.tokens_reasoning, e.tokens_cache_read, e.tokens_cache_write)
            steps[str(e.assistant_message_id)].update(finish=e.finish, tokens=tokens, cost=e.cost)
        elif e.kind == "step:fail":
            steps[str(e.assistant_message_id)]["error"] = (e.error_type, e.error_message)
    return turns


@pytest.mark.parametrize("name", sorted(STORES))
def test_each_legacy_turn_rebuilds_to_the_legacy_message_store(name: str) -> None:
    session_id, messages = store(name)
    expected = turns_of_store(messages)
    assert expected, "the capture has at least one turn"
    assert turns_of_events(mapped(legacy_stream(name, session_id))) == expected


def test_the_sync_log_rebuilds_the_same_legacy_turn_as_the_event_stream() -> None:
    (session_id,) = {e.aggregate_id for e in x9_sync_log()}
    from_log = turns_of_events(mapped(x9_sync_log()))
    from_bus = turns_of_events(mapped(legacy_stream("x9-sync-history", session_id)))
    assert from_log == from_bus
    (turn,) = from_log.values()
    assert len(turn["steps"]) == 3
    assert [len(s["tools"]) for s in turn["steps"].values()] == [1, 1, 0]


def test_tool_start_carries_the_input_the_store_has() -> None:
    session_id, messages = store("x1-legacy-tool-turn")
    inputs = {p["callID"]: p["state"]["input"] for m in messages for p in m["parts"] if p["type"] == "tool"}
    starts = [e for e in mapped(legacy_stream("x1-legacy-tool-turn", session_id)) if e.kind == "tool:start"]
    assert len(starts) == len(inputs) == 3
    for e in starts:
        call = tool_call(e.envelope)
        assert call is not None and call.status == "running" and call.input == inputs[e.call_id]


def test_legacy_errors_keep_their_name_as_type_and_data_message_as_message() -> None:
    session_id, _ = store("l2-legacy-provider-retry")
    errors = [e for e in mapped(legacy_stream("l2-legacy-provider-retry", session_id))
              if e.kind in ("step:fail", "legacy:session-error")]
    assert sorted((e.kind, e.error_type, e.error_message) for e in errors) == [
        ("legacy:session-error", "APIError", "Rate limit exceeded (mock)"),
        ("step:fail", "APIError", "Rate limit exceeded (mock)"),
    ]


# --- once, from any source, across restarts ----------------------------------------------------------

SOURCES = [(name, *store(name)[:1]) for name in sorted(STORES)]


def _persisted(envs: Iterable[Envelope]) -> list[Envelope]:
    return [e for e in envs if e.type in PERSISTED_LEGACY]


@pytest.mark.parametrize(("name", "session_id"), SOURCES)
def test_a_grown_part_ends_once(name: str, session_id: str) -> None:
    events = [e for e in mapped(legacy_stream(name, session_id)) if e.type in PERSISTED_LEGACY]
    updates = Counter(e.part_id for e in events if e.type == "message.part.updated")
    ends = Counter((e.part_id, e.kind) for e in events if e.kind in END_KINDS and e.part_id is not None)
    assert all(n == 1 for n in ends.values())
    _, messages = store(name)
    final_parts = {p["id"] for m in messages for p in m["parts"] if p["type"] in ("text", "reasoning", "tool",
                                                                                  "step-finish")}
    assert {part for part, _ in ends} == final_parts
    if name != "l2-legacy-provider-retry":  # l2's only assistant message failed before any part
        assert max(updates.values()) >= 2, "the capture does re-send parts as they grow"


@pytest.mark.parametrize(("name", "session_id"), SOURCES)
def test_a_state_seeded_from_stored_rows_continues_like_an_uninterrupted_one(name: str, session_id: str) -> None:
    envs = _persisted(legacy_stream(name, session_id))
    straight = [e.kind for e in mapped(envs)]
    for cut in range(len(envs) + 1):
        rows = [{"event_id": e.event_id, "kind": e.kind, "part_id": e.part_id, "message_id": e.message_id,
                 "assistant_message_id": e.assistant_message_id} for e in mapped(envs[:cut]) if e.kind in SEED_KINDS]
        resumed = mapped(envs[cut:], LegacyTurnState.from_rows(reversed(rows)))
        assert [e.kind for e in resumed] == straight[cut:], cut


@pytest.mark.parametrize(("name", "session_id"), SOURCES)
def test_mapping_an_event_again_gives_the_same_kind(name: str, session_id: str) -> None:
    envs = _persisted(legacy_stream(name, session_id))
    state = LegacyTurnState()
    first = [normalize_legacy(e, state).kind for e in envs]
    assert [normalize_legacy(e, state).kind for e in envs] == first


def test_sync_log_and_event_stream_give_each_legacy_event_the_same_kind() -> None:
    log = mapped(x9_sync_log())
    (session_id,) = {e.envelope.aggregate_id for e in log}
    bus = {e.event_id: e for e in mapped(legacy_stream("x9-sync-history", session_id))}
    for e in log:
        if e.type in PERSISTED_LEGACY:
            assert e.kind == bus[e.event_id].kind, e.seq


def test_v2_events_of_the_sync_log_map_like_the_history() -> None:
    history = json.loads((FIXTURES / "x9-sync-history" / "08-v2-history.json").read_text())
    expected = [normalize(parse_envelope(i)) for i in history["response"]["body"]["data"]]
    got = [e for e in mapped(x9_sync_log()) if e.type.startswith("session.next.")]
    assert got == expected


def _x7() -> list[tuple[bool, Envelope]]:
    return [(f.twin, f.envelope) for f in map(parse_global_frame, sse_data(FIXTURES / "x7-global-event-legacy"
                                                                             / "global.sse"))]


def test_global_twins_give_the_legacy_event_stream_kinds_in_two_directories() -> None:
    frames = _x7()
    twins = [env for twin, env in frames if twin]
    by_session: dict[str | None, list[Envelope]] = defaultdict(list)
    for env in twins:
        by_session[env.aggregate_id].append(env)
    assert len(by_session) == 2
    legacy = {e.event_id: e.kind for sid in by_session for e in mapped(legacy_stream("x7-global-event-legacy",
                                                                                     str(sid)))}
    compared = 0
    for envs in by_session.values():
        kinds = [e.kind for e in mapped(envs)]
        assert kinds.count("prompt:admitted") == 1 and kinds.count("text:end") >= 1
        for env, kind in zip(envs, kinds, strict=True):
            if env.id in legacy:
                assert legacy[env.id] == kind
                compared += 1
    assert compared > 20  # the proj session is on the per-directory /event stream too


def _concatenated_deltas(events: Iterable[ChatEvent]) -> tuple[dict[str | None, str], dict[str | None, str]]:
    deltas: dict[str | None, str] = defaultdict(str)
    ended: dict[str | None, str] = {}
    for e in events:
        if e.kind in ("delta:text", "delta:reasoning"):
            deltas[e.part_id] += e.text or ""
        elif e.kind in ("text:end", "reasoning:end"):
            ended[e.part_id] = e.text or ""
    return deltas, ended


@pytest.mark.parametrize(("name", "session_id"), SOURCES)
def test_legacy_deltas_concatenate_to_the_ended_text(name: str, session_id: str) -> None:
    deltas, ended = _concatenated_deltas(mapped(legacy_stream(name, session_id)))
    assert set(deltas) <= set(ended)
    for part_id, text in deltas.items():
        assert ended[part_id] == text


def test_reasoning_deltas_are_reasoning_deltas() -> None:
    session_id, _ = store("x2-legacy-reasoning")
    kinds = Counter(e.kind for e in mapped(legacy_stream("x2-legacy-reasoning", session_id)))
    assert kinds["delta:reasoning"] == 3 and kinds["delta:text"] == 5 and kinds["legacy:part-delta"] == 0


def test_global_bus_deltas_of_both_runtimes_concatenate_to_the_ended_text() -> None:
    state = LegacyTurnState()
    events = [normalize_legacy(env, state) for twin, env in _x7() if not twin]
    deltas, ended = _concatenated_deltas(events)
    assert deltas and all(ended[p] == t for p, t in deltas.items())
    v2 = [parse_global_frame(d) for d in sse_data(FIXTURES / "x11-global-event-v2" / "global.sse")]
    v2_events = [normalize_legacy(f.envelope, state) for f in v2 if not f.twin]
    text = "".join(e.text or "" for e in v2_events if e.kind == "delta:text")
    assert text and [e.text for e in v2_events if e.kind == "text:end"] == [text]


def test_legacy_permission_request_and_reply_are_permission_kinds() -> None:
    session_id, messages = store("x5-legacy-permission")
    perms = [e for e in mapped(legacy_stream("x5-legacy-permission", session_id)) if e.kind.startswith("permission:")]
    (tool,) = [p for m in messages for p in m["parts"] if p["type"] == "tool"]
    asked, replied = perms
    assert (asked.kind, asked.action, asked.call_id) == ("permission:asked", "bash", tool["callID"])
    assert (replied.kind, replied.request_id, replied.reply) == ("permission:replied", asked.request_id, "once")


def test_no_legacy_capture_has_an_unknown_event_or_part_type() -> None:
    for name, session_id in SOURCES:
        assert [e.type for e in mapped(legacy_stream(name, session_id)) if e.kind == "unknown"] == [], name
    assert [e.type for e in mapped(x9_sync_log()) if e.kind == "unknown"] == []
    assert [e.type for _, env in _x7() for e in mapped([env]) if e.kind == "unknown"] == []


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/legacy*.sse")), ids=lambda p: p.parent.name)
def test_every_legacy_event_stream_frame_parses_and_maps_to_a_known_kind(path: Path) -> None:
    states: defaultdict[str | None, LegacyTurnState] = defaultdict(LegacyTurnState)
    frames = sse_data(path)
    events = [normalize_legacy(env, states[env.session_id]) for env in map(legacy_frame, frames)]
    assert len(events) == len(frames) and [e.type for e in events if e.kind == "unknown"] == []
