"""Client frames in, server messages out (docs/websocket.md)."""

from __future__ import annotations

import pytest

from bridge.fanout import protocol as p


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"op":"subscribe","session":"ses_A"}', p.Subscribe("ses_A", None)),
        ('{"op":"subscribe","session":"ses_A","after":0,"id":"r"}', p.Subscribe("ses_A", 0, "r")),
        ('{"op":"unsubscribe","session":"ses_A","id":3}', p.Unsubscribe("ses_A", 3)),
        ('{"op":"ping"}', p.Ping()),
    ],
)
def test_valid_client_messages_parse(text: str, expected: p.ClientOp) -> None:
    assert p.parse_client_message(text) == expected


@pytest.mark.parametrize(
    "text",
    ["nope", "[]", '{"op":"dance"}', '{"op":"subscribe"}', '{"op":"subscribe","session":""}',
     '{"op":"subscribe","session":"s","after":-1}', '{"op":"subscribe","session":"s","after":true}',
     '{"op":"subscribe","session":"s","after":1.5}', '{"op":"ping","id":{"a":1}}', "[" * 100000],
)
def test_bad_client_messages_are_bad_message(text: str) -> None:
    with pytest.raises(p.ProtocolError) as e:
        p.parse_client_message(text)
    assert e.value.code == p.ERR_BAD_MESSAGE


def test_event_message_has_normalized_fields_and_raw_data() -> None:
    env = {"id": "evt_1", "type": "session.next.tool.called",
           "durable": {"aggregateID": "ses_A", "seq": 6, "version": 1},
           "data": {"sessionID": "ses_A", "callID": "call_1", "tool": "bash", "input": {"command": "echo hi"}}}
    msg = p.event_message("ses_A", 6, env)
    assert msg["kind"] == "tool:start" and msg["seq"] == 6 and msg["event_id"] == "evt_1"
    assert msg["fields"] == {"call_id": "call_1", "tool_name": "bash", "input": {"command": "echo hi"}}
    assert msg["data"]["input"] == {"command": "echo hi"}


def test_a_stored_row_that_is_not_an_envelope_still_yields_a_message() -> None:
    msg = p.event_message("ses_A", 2, {"type": 5})
    assert msg["kind"] == "unknown" and msg["seq"] == 2 and msg["data"] == {}


def test_close_codes_are_distinct() -> None:
    codes = [p.CLOSE_GOING_AWAY, p.CLOSE_MESSAGE_TOO_BIG, p.CLOSE_UNAUTHORIZED, p.CLOSE_TOKEN_EXPIRED,
             p.CLOSE_SLOW_CONSUMER]
    assert len(set(codes)) == len(codes)
