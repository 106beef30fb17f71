"""Session commands (bridge.commands.session_ops): validation, canonical args, the upstream route, the
answer; a retry of the same slash command re-sends the same message id (docs/commands.md)."""

from __future__ import annotations

import pytest

from bridge.commands.model import CommandError, parse_command
from bridge.commands.session_ops import result_body, route

SID = "ses_22a3c4b1bffeABCDEFGHIJKLMN"


def test_title_is_a_bounded_string_sent_as_the_legacy_patch() -> None:
    cmd = parse_command("title", {"command_id": "c1", "title": "Plan the release", "x": 1}, SID)
    assert dict(cmd.args) == {"title": "Plan the release"}
    assert route("title", cmd.args, None) == ("PATCH", "", {"title": "Plan the release"})
    for bad in ("", "x" * 501, 3, None):
        with pytest.raises(CommandError) as e:
            parse_command("title", {"command_id": "c1", "title": bad}, SID)
        assert e.value.code == "bad_request"


def test_revert_needs_a_message_id_unrevert_nothing_fork_an_optional_one() -> None:
    assert route("revert", parse_command("revert", {"command_id": "c", "message_id": "msg_A"}, SID).args,
                 None) == ("POST", "revert", {"messageID": "msg_A"})
    with pytest.raises(CommandError):
        parse_command("revert", {"command_id": "c"}, SID)
    with pytest.raises(CommandError):
        parse_command("revert", {"command_id": "c", "message_id": "../x"}, SID)
    assert route("unrevert", parse_command("unrevert", {"command_id": "c"}, SID).args, None) == (
        "POST", "unrevert", {})
    assert route("fork", parse_command("fork", {"command_id": "c"}, SID).args, None) == ("POST", "fork", {})
    assert route("fork", parse_command("fork", {"command_id": "c", "message_id": "msg_B"}, SID).args, None) == (
        "POST", "fork", {"messageID": "msg_B"})


def test_slash_command_carries_the_derived_message_id() -> None:
    cmd = parse_command("slash_command", {"command_id": "c", "command": "review", "arguments": "src/"}, SID)
    assert route("slash_command", cmd.args, "msg_X") == (
        "POST", "command", {"messageID": "msg_X", "command": "review", "arguments": "src/"})
    bare = parse_command("slash_command", {"command_id": "c", "command": "init"}, SID)
    assert dict(bare.args) == {"command": "init", "arguments": ""}
    with pytest.raises(CommandError):
        parse_command("slash_command", {"command_id": "c", "command": "a b"}, SID)


def test_answers_name_ids_only() -> None:
    assert result_body("fork", "c", SID, {}, {"id": "ses_new", "title": "x"}) == {
        "command_id": "c", "session_id": SID, "forked_session_id": "ses_new"}
    assert result_body("revert", "c", SID, {"message_id": "m"}, {"revert": {"messageID": "m", "snapshot": "s"}}) == {
        "command_id": "c", "session_id": SID, "revert": {"message_id": "m", "part_id": None}}
    assert result_body("unrevert", "c", SID, {}, {"id": SID})["revert"] is None
