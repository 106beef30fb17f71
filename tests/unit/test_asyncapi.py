"""The AsyncAPI 3 document of `/v1/ws` (bridge/http/asyncapi.json) against the protocol module that makes
the frames: every frame builder's output is in the document, every op the parser takes is described, and
the document refuses what the protocol refuses."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import make_mocked_request
from hypothesis import given
from hypothesis import strategies as st

from bridge.commands.model import REQUIRED_SCOPE, CommandError
from bridge.errors import KNOWN_ERROR_CODES
from bridge.events import Kind
from bridge.fanout import protocol as p
from bridge.fanout.frames import command_message
from bridge.fanout.read_queue import busy_message
from bridge.http.ws import asyncapi
from bridge.store.notices import CommandNotice
from tests.support.asyncapi import DOC, FRAME_SCHEMAS, check_client_op, check_server_frame

SID = "ses_abc"


def test_it_is_asyncapi_3_with_one_channel_and_both_directions() -> None:
    assert DOC["asyncapi"].startswith("3.") and DOC["channels"]["ws"]["address"] == "/v1/ws"
    assert {o["action"] for o in DOC["operations"].values()} == {"send", "receive"}
    assert set(DOC["components"]["schemas"]["ErrorCode"]["enum"]) == set(KNOWN_ERROR_CODES)


async def test_the_document_is_served_at_v1_asyncapi_json() -> None:
    resp = await asyncapi(make_mocked_request("GET", "/v1/asyncapi.json"))
    assert resp.content_type == "application/json" and isinstance(resp.body, bytes)
    assert json.loads(resp.body) == DOC


def test_every_command_is_an_op_of_the_document() -> None:
    assert set(DOC["components"]["schemas"]["CommandName"]["enum"]) == set(REQUIRED_SCOPE)
    for name in REQUIRED_SCOPE:
        assert f"command:{name}" in DOC["x-client-ops"], name


def _frames() -> list[dict[str, object]]:
    delta = SimpleNamespace(kind=Kind.DELTA_TEXT, assistant_message_id="msg_1", part_id="t0", text="He", call_id=None)
    tool = SimpleNamespace(kind=Kind.DELTA_TOOL_INPUT, assistant_message_id="msg_1", part_id=None, text="{",
                           call_id="c")
    return [
        p.hello_message("up", None, None), p.hello_message("up", [SID], 1.5e9, "prompt", "once"),
        p.subscribed_message(SID, None, -1, True, None, "r1"),
        p.subscribed_message(SID, 3, 9, False, "idle", 7, "t", "ses_parent"),
        p.caught_up_message(SID, -1), p.delta_message(SID, delta, 4),  # type: ignore[arg-type]
        p.delta_message(SID, tool, 5),  # type: ignore[arg-type]
        p.status_message(SID, "waiting", "question since 2026-12-01T21:10:22Z"), p.status_message(SID, "idle", None),
        p.unsubscribed_message(SID, None), p.pong_message("x"),
        p.sessions_message([{"session": SID, "head": 3, "status": None, "title": None, "parent_id": None,
                             "last_event_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat()}], 1, "n"),
        p.command_result_message("prompt", 200, {"command_id": "c", "message_id": "msg_x", "admitted_seq": None,
                                                 "delivery": "queue"}, 1),
        p.command_result_message("fork", 200, {"command_id": "c", "session_id": SID, "forked_session_id": None}, 2),
        p.command_result_message("prompt", 429, CommandError("rate_limited", "slow", retry_after=1.0).body(), 3),
        p.command_result_message("prompt", 409, {"error": "conflict", "message": "m"}, None),
        p.error_message(p.ERR_SLOW_CONSUMER, "slow consumer", resume={SID: 4}),
        p.error_message(p.ERR_INTERNAL, "failed", 1, SID, correlation_id="abc"),
        busy_message(0.5, 2, SID),
        command_message(CommandNotice("up", SID, "c1", "queued")),
    ]


def test_every_frame_the_protocol_makes_is_in_the_document() -> None:
    for frame in _frames():
        assert check_server_frame(json.loads(p.dumps(frame))) == [], frame
        assert frame["type"] in FRAME_SCHEMAS


@pytest.mark.parametrize("frame", [
    {"type": "nope"},
    {"type": "pong", "extra": 1},
    {"type": "caught_up", "session": "../etc", "seq": 1},
    {"type": "error", "code": "x", "message": "y"},  # no envelope
    {"type": "command_result", "command": "prompt", "status": 409, "error": "conflict"},  # the old flat error
    {"type": "subscribed", "session": SID, "after": None, "head": 1, "complete": True, "status": "idle"},
])
def test_a_frame_outside_the_document_is_caught(frame: dict[str, object]) -> None:
    assert check_server_frame(frame) != []


OPS = [
    {"op": "subscribe", "session": SID}, {"op": "subscribe", "session": SID, "after": 0, "id": "a"},
    {"op": "unsubscribe", "session": SID}, {"op": "ping", "id": 1}, {"op": "sessions", "limit": 5, "parent": SID},
    {"op": "command", "command": "prompt", "session": SID, "command_id": "c", "text": "hi", "delivery": "steer"},
    {"op": "command", "command": "create_session", "command_id": "c", "directory": "/srv/p"},
    {"op": "command", "command": "question_reply", "session": SID, "request_id": "que_1", "command_id": "c",
     "answers": [["Red"]]},
    {"op": "command", "command": "question_reject", "session": SID, "request_id": "que_1", "command_id": "c"},
    {"op": "command", "command": "title", "session": SID, "command_id": "c", "title": "T"},
    {"op": "command", "command": "revert", "session": SID, "command_id": "c", "message_id": "msg_1"},
    {"op": "command", "command": "unrevert", "session": SID, "command_id": "c"},
    {"op": "command", "command": "fork", "session": SID, "command_id": "c"},
    {"op": "command", "command": "slash_command", "session": SID, "command_id": "c", "name": "review"},
]


@pytest.mark.parametrize("op", OPS, ids=lambda o: f"{o['op']}:{o.get('command', '')}")
def test_every_documented_op_parses_and_a_slash_command_names_itself_in_name(op: dict[str, object]) -> None:
    assert check_client_op(op) == []
    parsed = p.parse_client_message(json.dumps(op))
    if isinstance(parsed, p.CommandOp) and parsed.command == "slash_command":
        assert parsed.body["command"] == "review" and "name" not in parsed.body


@given(after=st.integers())
def test_the_document_and_the_parser_agree_on_after(after: int) -> None:
    op = {"op": "subscribe", "session": SID, "after": after}
    try:
        p.parse_client_message(json.dumps(op))
        parsed = True
    except p.ProtocolError:
        parsed = False
    assert parsed == (check_client_op(op) == [])


def test_the_shared_schemas_are_the_openapi_document_s() -> None:
    """Results, ids and the error envelope mean the same over HTTP and the socket: the same schemas."""
    from bridge.http.audit import OPENAPI_PATH

    openapi = json.loads(OPENAPI_PATH.read_text())["components"]["schemas"]
    for name in ("SessionCreated", "PromptAdmitted", "Interrupted", "CommandDone", "PermissionReplied",
                 "QuestionAnswered", "CommandId", "Name", "Directory", "ErrorCode"):
        assert DOC["components"]["schemas"][name] == openapi[name], name
    for name, op in DOC["x-client-ops"].items():
        if not name.startswith("command:"):
            continue
        props = DOC["components"]["schemas"][op]["properties"]
        assert props["command_id"] == {"$ref": "#/components/schemas/CommandId"}, name
