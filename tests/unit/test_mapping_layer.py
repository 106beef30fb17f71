"""The mapping layer's newer parts: kinds as an enum, stored rows, permission updates, rows → frames."""

from __future__ import annotations

import json

from bridge.events import (
    KINDS,
    TYPE_KINDS,
    Kind,
    normalize,
    normalize_stored,
    parse_envelope,
    pending_request,
    permission_update,
    resolved_while_away,
    stored_permission,
)
from bridge.fanout import protocol as p

ASKED_DATA = {"id": "per_1", "sessionID": "ses_A", "action": "bash", "resources": ["ls"],
              "source": {"type": "tool", "messageID": "msg_M", "callID": "call_1"}}


def test_a_kind_is_its_string_everywhere_it_goes() -> None:
    assert Kind.TEXT_END == "text:end" and "text:end" in KINDS and Kind("tool:start") is Kind.TOOL_START
    assert json.dumps({"kind": Kind.STEP_END}) == '{"kind": "step:end"}'
    assert set(TYPE_KINDS.values()) <= set(Kind)


def test_an_odd_stored_row_still_maps_to_an_unknown_event() -> None:
    ev = normalize_stored({"type": 5, "data": {"textID": "t"}})
    assert ev.kind is Kind.UNKNOWN and ev.data == {"textID": "t"} and ev.event_id == ""
    assert normalize_stored(None).data == {}


def test_a_resynced_request_is_the_same_update_as_the_live_event_it_stands_for() -> None:
    live = permission_update(normalize(parse_envelope({"id": "evt_1", "type": "permission.v2.asked",
                                                       "data": ASKED_DATA})))
    resynced = pending_request("ses_A", ASKED_DATA)
    assert live is not None and resynced is not None
    assert p.permission_message("ses_A", live) == p.permission_message("ses_A", resynced)
    # and the stored record reads back to the same update
    again = stored_permission("ses_A", resynced.record)
    assert again is not None and p.permission_message("ses_A", again) == p.permission_message("ses_A", live)


def test_a_request_gone_upstream_is_replied_unknown_with_a_note() -> None:
    msg = p.permission_message("ses_A", resolved_while_away("ses_A", "per_9", "answered meanwhile"))
    assert (msg["state"], msg["request_id"], msg["reply"]) == ("replied", "per_9", "unknown")
    assert msg["data"]["note"] == "answered meanwhile"


def test_a_pending_item_without_an_id_is_no_update() -> None:
    assert pending_request("ses_A", {"action": "bash"}) is None
    assert stored_permission("ses_A", {"id": "evt", "type": "session.next.text.started", "data": {}}) is None


def test_rows_become_the_same_frames_for_the_live_feed_and_the_replay() -> None:
    env = {"id": "evt_1", "type": "session.next.text.ended", "durable": {"aggregateID": "ses_A", "seq": 3},
           "data": {"sessionID": "ses_A", "textID": "t", "text": "Hi"}}
    frames = p.event_frames("ses_A", [(3, env, None)])
    assert frames == [(3, p.dumps(p.event_message("ses_A", 3, env)))]
    msg = json.loads(frames[0][1])
    assert msg["kind"] == "text:end" and msg["fields"]["text"] == "Hi"
    assert msg["data"] == {"sessionID": "ses_A", "textID": "t"}  # the text is sent once, in fields
