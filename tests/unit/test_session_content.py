"""The whole session as OpenCode shows it, mapped over the captures `x14-subagent-todo-diff` and
`x15-undo-delete-attach` (docs/upstream.md §20, §22): every event and part type gets a known kind, synthetic
text never becomes a prompt, attachments and patches have their fields, removal and undo are marked in the
transcript, the task card names its child session."""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bridge.audit.transcript import build_transcript
from bridge.events import ChatEvent, Envelope, Kind
from bridge.events.content import content_fields, diff_items, file_fields, todo_items
from bridge.events.legacy import LegacyTurnState, normalize_legacy
from bridge.events.syncframes import parse_global_frame, parse_sync_log
from bridge.fanout.frames import live_state_message
from bridge.fanout.protocol import event_message
from bridge.upstream.sse import SSEEvent, SSEParser
from tests.support.legacy_rows import legacy_frame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
X14, X15 = "x14-subagent-todo-diff", "x15-undo-delete-attach"
SYNC = {X14: "09-sync-history-parent.json", X15: "12-sync-history.json"}
X14_PARENT, X14_CHILD = "ses_dcc8ddba4ffeA8xnhG7Mr7NwHY", "ses_dcc8ddafcffe56S4KuDC8bVEWz"
X15_SESSION = "ses_dcc8dbc8effeTwaLrwelAKi9EZ"


def _sse(path: Path) -> list[str]:
    parser = SSEParser()
    return [i.data for i in parser.feed(path.read_bytes()) + parser.close() if isinstance(i, SSEEvent)]


@cache
def sync_log(name: str) -> tuple[Envelope, ...]:
    body = json.loads((FIXTURES / name / SYNC[name]).read_text())["response"]["body"]
    items = parse_sync_log(body)
    assert all(isinstance(e, Envelope) for e in items)
    return tuple(e for e in items if isinstance(e, Envelope))


def mapped_log(name: str) -> dict[str, list[ChatEvent]]:
    """Every session of the sync log, mapped in seq order with its own state."""
    by_session: dict[str, list[Envelope]] = defaultdict(list)
    for env in sync_log(name):
        by_session[str(env.aggregate_id)].append(env)
    out = {}
    for sid, envs in by_session.items():
        state = LegacyTurnState()
        out[sid] = [normalize_legacy(e, state) for e in sorted(envs, key=lambda e: e.seq or 0)]
    return out


def rows(events: list[ChatEvent]) -> list[dict[str, Any]]:
    return [{"seq": ev.seq, "kind": str(ev.kind), "payload": ev.envelope.raw} for ev in events]


@pytest.mark.parametrize("name", [X14, X15])
def test_every_sync_log_event_of_the_captures_has_a_known_kind(name: str) -> None:
    for sid, events in mapped_log(name).items():
        unknown = [(ev.seq, ev.type, ev.data.get("part", {}).get("type")) for ev in events if ev.kind == Kind.UNKNOWN]
        assert unknown == [], (sid, unknown)


@pytest.mark.parametrize("name", [X14, X15])
def test_every_live_event_of_the_captures_has_a_known_kind(name: str) -> None:
    states: dict[str | None, LegacyTurnState] = defaultdict(LegacyTurnState)
    legacy = [legacy_frame(d) for d in _sse(FIXTURES / name / "legacy.sse")]
    global_ = [parse_global_frame(d).envelope for d in _sse(FIXTURES / name / "global.sse")]
    for envs in (legacy, global_):
        states.clear()
        kinds = [(e.type, normalize_legacy(e, states[e.session_id]).kind) for e in envs]
        assert [k for k in kinds if k[1] == Kind.UNKNOWN] == []
        assert len(kinds) > 100


def test_content_part_types_have_their_kinds() -> None:
    kinds = {ev.kind for events in mapped_log(X15).values() for ev in events}
    assert {Kind.FILE_ATTACHED, Kind.PROMPT_SYNTHETIC, Kind.PATCH, Kind.MESSAGE_REMOVED} <= kinds
    x14 = {ev.kind for ev in mapped_log(X14)[X14_PARENT]}
    assert Kind.PATCH in x14


def test_synthetic_text_is_part_of_its_prompt_never_a_prompt() -> None:
    events = mapped_log(X15)[X15_SESSION]
    synthetic = [ev for ev in events if ev.data.get("part", {}).get("synthetic") is True]
    assert len(synthetic) == 2
    assert {ev.kind for ev in synthetic} == {Kind.PROMPT_SYNTHETIC}
    prompts = [ev for ev in events if ev.kind == Kind.PROMPT_ADMITTED]
    assert all(ev.data["part"].get("synthetic") is not True for ev in prompts)
    transcript = build_transcript(rows(events))
    user = [e for e in transcript if e["type"] == "user"]
    assert [e["text"] for e in user] == ["MOCK:write one [211056]", "MOCK:text two [211057]",
                                         "MOCK:text after revert [211103]", "MOCK:text with file [211106]"]
    with_file = user[-1]
    assert [s["text"][:24] for s in with_file["synthetic"]] == ["Called the Read tool wit", "<path>/srv/agent/proj/he"]
    assert with_file["attachments"] == [{"id": "prt_233726b95004mK09XO3qxxN26z", "seq": 66, "filename": "hello.txt",
                                         "mime": "text/plain", "url": "file:///srv/agent/proj/hello.txt",
                                         "url_scheme": "file"}]


def test_removed_messages_are_marked_not_dropped() -> None:
    transcript = build_transcript(rows(mapped_log(X15)[X15_SESSION]))
    removed = {e["message_id"]: e["removed_seq"] for e in transcript if e.get("removed")}
    assert removed == {"msg_233724a37001nw0jVvbw7ACaei": 44, "msg_233724a4d001QCSEXaKqrLMZzm": 45,
                       "msg_233724396001cJOPvSmjDbsLwU": 61}
    assert len([e for e in transcript if e["type"] == "user"]) == 4  # still all there


def test_revert_marks_from_the_named_message_and_unrevert_clears() -> None:
    events = mapped_log(X15)[X15_SESSION]
    upto_43 = build_transcript(rows([ev for ev in events if (ev.seq or 0) <= 43]))
    marks = [(e["type"], e.get("reverted")) for e in upto_43]
    assert marks[-2:] == [("user", "from_here"), ("assistant", True)]
    assert all(m is None for _, m in marks[:-2])
    upto_42 = build_transcript(rows([ev for ev in events if (ev.seq or 0) <= 42]))
    assert all("reverted" not in e for e in upto_42)  # unrevert cleared it


def test_task_card_names_its_child_and_the_child_its_parent() -> None:
    log = mapped_log(X14)
    tools = [p for e in build_transcript(rows(log[X14_PARENT])) if e["type"] == "assistant"
             for p in e["parts"] if p.get("type") == "tool"]
    task = [t for t in tools if t["tool"] == "task"]
    assert len(task) == 1 and task[0]["child_session_id"] == X14_CHILD
    created = [ev for ev in log[X14_CHILD] if ev.kind == Kind.SESSION_CREATED]
    assert created[0].seq == 0 and content_fields(created[0])["parent_id"] == X14_PARENT


def test_patch_frame_lists_the_files_and_a_file_frame_never_carries_bytes() -> None:
    events = mapped_log(X14)[X14_PARENT]
    patch = next(ev for ev in events if ev.kind == Kind.PATCH)
    frame = event_message(X14_PARENT, patch.seq or 0, patch.envelope.raw, str(patch.kind))
    assert frame["kind"] == "patch" and frame["fields"]["files"] and frame["fields"]["files"][0].endswith("written.txt")
    data_url = "data:image/png;base64,AAAA"
    inline = file_fields({"type": "file", "mime": "image/png", "filename": "a.png", "url": data_url})
    assert inline == {"filename": "a.png", "mime": "image/png", "url_scheme": "data", "inline_bytes": 26}


def test_live_todo_and_diff_views() -> None:
    todos = json.loads((FIXTURES / X14 / "05-todo.json").read_text())["response"]["body"]
    assert [t["status"] for t in todo_items(todos)] and all("content" in t for t in todo_items(todos))
    assert diff_items([{"file": "a", "before": "x", "after": "y", "additions": 1, "deletions": 0}]) == [
        {"file": "a", "additions": 1, "deletions": 0}]
    assert todo_items("nope") == [] and diff_items({"x": 1}) == []


def test_live_state_frames_of_the_capture() -> None:
    """`todo.updated` and `session.diff` of x14's /global/event become `todo` / `diff` state frames."""
    frames = []
    for data in _sse(FIXTURES / X14 / "global.sse"):
        env = parse_global_frame(data).envelope
        msg = live_state_message(normalize_legacy(env, LegacyTurnState()))
        if msg is not None:
            frames.append(msg)
    todos = [f for f in frames if f["type"] == "todo"]
    assert todos == [{"type": "todo", "session": X14_PARENT, "todos": [
        {"content": "Write tests", "status": "in_progress", "priority": "high"},
        {"content": "Ship it", "status": "pending", "priority": "low"}]}]
    assert {f["type"] for f in frames} == {"todo", "diff"}
    err = normalize_legacy(legacy_frame(json.dumps({"id": "e", "type": "session.error", "properties": {
        "sessionID": X15_SESSION, "error": {"name": "ProviderAuthError", "data": {"message": "no key"}}}})),
        LegacyTurnState())
    assert live_state_message(err) == {"type": "session_error", "session": X15_SESSION,
                                       "error_type": "ProviderAuthError", "error_message": "no key"}
