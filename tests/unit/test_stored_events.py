"""Stored rows of either runtime read back through one interface (`bridge.events.stored`, docs/legacy.md,
docs/websocket.md §2.3): a legacy row gets its stored kind and the milestone's fields, a re-send only its
ids; legacy event frames carry the fields a v2 frame of the same kind carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.events import normalize, parse_frame
from bridge.events.stored import is_legacy_payload, stored_event, stored_permission
from bridge.fanout import protocol as p
from tests.support.legacy_rows import STORES, legacy_session, x9_sync_log

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
COMPARED = ("timestamp_ms", "message_id", "assistant_message_id", "part_id", "call_id", "tool_name",
            "error_type", "error_message", "finish", "tokens_input", "tokens_output", "tokens_reasoning",
            "tokens_cache_read", "tokens_cache_write", "cost", "text", "agent", "model_id", "provider_id")


@pytest.mark.parametrize("name", sorted(STORES))
def test_a_stored_legacy_row_reads_back_as_it_was_mapped(name: str) -> None:
    _, events = legacy_session(name)
    for ev in (e for e in events if e.seq is not None):
        assert is_legacy_payload(ev.envelope.raw)
        back = stored_event(ev.envelope.raw, ev.kind)
        assert back.kind == ev.kind and back.runtime == "legacy", ev.seq
        if not ev.kind.startswith("legacy:"):
            assert {k: getattr(back, k) for k in COMPARED} == {k: getattr(ev, k) for k in COMPARED}, ev.seq
        assert (back.error, back.tool_input, back.tool_output_text, back.tokens) == (
            ev.error, ev.tool_input, ev.tool_output_text, ev.tokens)


def test_a_re_send_carries_its_ids_only() -> None:
    _, events = legacy_session("x1-legacy-tool-turn")
    final = next(e for e in events if e.kind == "text:end")
    back = stored_event(final.envelope.raw, "legacy:part-updated")  # the same payload stored as a re-send
    assert back.kind == "legacy:part-updated" and back.part_id == final.part_id
    assert (back.text, back.tokens_input, back.error_message) == (None, None, None)
    assert p.event_message("ses_x", 9, final.envelope.raw, "legacy:part-updated")["fields"].get("text") is None


def test_v2_rows_and_odd_rows_read_back_as_before() -> None:
    _, events = x9_sync_log()
    for ev in (e for e in events if e.runtime == "v2"):
        assert not is_legacy_payload(ev.envelope.raw)
        assert stored_event(ev.envelope.raw, ev.kind) == ev
    assert stored_event({"id": "e", "aggregate_id": "ses_a", "seq": "x", "type": "message.updated.1"}).kind == "unknown"
    legacy = next(e for e in events if e.runtime == "legacy" and e.kind == "step:start")
    assert stored_event(legacy.envelope.raw, "not-a-kind").kind == "unknown"
    assert stored_event(legacy.envelope.raw).kind == "step:start"  # no stored kind: as if first seen


def _frames_by_kind(rows: list[tuple[int, dict[str, Any], str | None]]) -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for _, frame in p.event_frames("ses_x", rows):
        msg = json.loads(frame)
        keys.setdefault(msg["kind"], set()).update(msg["fields"])
    return keys


def test_legacy_frames_carry_every_field_a_v2_frame_of_the_same_kind_carries() -> None:
    lines = (FIXTURES / "b-tool-turn" / "durable.sse").read_text().splitlines()
    v2 = [normalize(parse_frame(line[6:])) for line in lines if line.startswith("data: ")]
    v2_keys = _frames_by_kind([(e.seq or 0, e.envelope.raw, None) for e in v2])
    _, events = legacy_session("x1-legacy-tool-turn")
    legacy_keys = _frames_by_kind([(e.seq, e.envelope.raw, e.kind) for e in events if e.seq is not None])
    # An upstream fact, not a runtime leak: a legacy tool's error is a bare string, without a type.
    allowed = {"tool:fail": {"error_type"}}
    shared = set(v2_keys) & set(legacy_keys)
    assert shared >= {"prompt:admitted", "step:start", "step:end", "text:start", "text:end", "tool:input-start",
                      "tool:start", "tool:success", "tool:fail"}
    for kind in shared:
        missing = v2_keys[kind] - legacy_keys[kind] - allowed.get(kind, set()) - {"delivery"}
        assert not missing, (kind, missing)


def test_a_stored_legacy_permission_record_reads_back_with_its_runtime() -> None:
    session_id, events = legacy_session("x5-legacy-permission")
    asked = next(e for e in events if e.kind == "permission:asked")
    replied = next(e for e in events if e.kind == "permission:replied")
    a = stored_permission(session_id, asked.envelope.raw)
    r = stored_permission(session_id, replied.envelope.raw)
    assert a is not None and r is not None
    assert (a.runtime, a.replied, a.action, a.call_id, a.resources) == (
        "legacy", False, "bash", asked.call_id, asked.data["patterns"])
    assert (r.runtime, r.replied, r.reply, r.request_id) == ("legacy", True, "once", a.request_id)
    assert stored_permission(session_id, {"id": "x", "type": "session.idle", "properties": {}}) is None
