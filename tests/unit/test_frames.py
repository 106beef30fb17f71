"""bridge.fanout.frames: the frame vocabulary of `/v1/ws` — every frame but the durable `event` frames is
shaped here; the todo/diff frame once for the live events and the re-reads, with the HTTP answers' items."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.events import Kind
from bridge.fanout import frames as f
from bridge.fanout import protocol
from bridge.store.notices import CommandNotice
from tests.support.commands_twin import SID


class _Event:
    """The fields of bridge.events.ChatEvent a state frame reads."""

    def __init__(self, kind: str, data: dict[str, Any], session_id: str | None = SID) -> None:
        self.kind, self.data, self.session_id = kind, data, session_id
        self.error_type, self.error_message = "APIError", "boom"


TODOS = [{"content": "write tests", "status": "pending", "priority": "high", "id": "t1"}]
DIFF = [{"file": "a.py", "additions": 3, "deletions": 1, "status": "modified", "before": "x", "after": "y"}]


@pytest.mark.parametrize(("kind", "what", "data", "raw"), [
    (Kind.TODO_UPDATED, "todo", {"todos": TODOS}, TODOS),
    (Kind.LEGACY_SESSION_DIFF, "diff", {"diff": DIFF}, DIFF),
])
def test_a_live_state_event_and_a_re_read_make_the_same_frame(kind: str, what: str, data: dict[str, Any],
                                                              raw: list[dict[str, Any]]) -> None:
    live = f.live_state_message(_Event(kind, data))  # type: ignore[arg-type]
    assert live == f.state_frame(SID, what, f.STATE_ITEMS[what](raw))
    assert live is not None and live["type"] == what and live["session"] == SID
    items = live[f.FRAME_FIELD[what]]
    assert all("before" not in i and "after" not in i for i in items)  # never a file's contents


def test_a_session_error_frame_and_events_that_make_none() -> None:
    err = f.live_state_message(_Event(Kind.LEGACY_SESSION_ERROR, {}))  # type: ignore[arg-type]
    assert err == {"type": "session_error", "session": SID, "error_type": "APIError", "error_message": "boom"}
    assert f.live_state_message(_Event(Kind.TODO_UPDATED, {"todos": []}, None)) is None  # type: ignore[arg-type]
    assert f.live_state_message(_Event(Kind.TEXT_END, {})) is None  # type: ignore[arg-type]


def test_a_command_notice_frame() -> None:
    assert f.command_message(CommandNotice("up", SID, "c1", "queued")) == {
        "type": "command", "session": SID, "command": "prompt", "command_id": "c1", "state": "queued"}


def test_answers_to_an_op_carry_its_id_and_errors_the_envelope() -> None:
    assert f.pong_message("r1") == {"type": "pong", "id": "r1"}
    assert "id" not in f.pong_message(None)
    err = f.error_message("busy", "wait", "r2", SID, retry_after=1.5)
    assert err["error"]["code"] == "busy" and err["error"]["retry_after"] == 1.5
    assert (err["code"], err["session"], err["id"]) == ("busy", SID, "r2")  # the deprecated top-level copy
    ok = f.command_result_message("prompt", 200, {"message_id": "m"}, "r3")
    assert ok == {"type": "command_result", "command": "prompt", "status": 200, "result": {"message_id": "m"},
                  "id": "r3"}
    old = f.command_result_message("prompt", 409, {"error": "conflict", "message": "used"}, None)
    assert old["error"]["code"] == "conflict"  # a row stored before the envelope, brought into its shape
    hello = f.hello_message("up", None, None)
    assert (hello["max_subscriptions"], hello["max_message_bytes"]) == (f.MAX_SUBSCRIPTIONS,
                                                                        f.MAX_CLIENT_MESSAGE_BYTES)


def test_waiting_status_says_what_for() -> None:
    assert "waiting" not in f.status_message(SID, "busy", None)
    assert "waiting" in f.status_message(SID, "waiting", "permission")


def test_the_protocol_module_names_the_same_builders() -> None:
    for name in ("error_message", "hello_message", "status_message", "delta_message", "permission_message",
                 "subscribed_message", "command_result_message", "erased_message"):
        assert getattr(protocol, name) is getattr(f, name)
