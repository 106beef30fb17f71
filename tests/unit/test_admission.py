"""bridge.command_service.admission: what a command must pass before any row or upstream call — the token's
scope, sessions and approval right, and a new session's directory against the allow-list."""

from __future__ import annotations

import pytest

from bridge.command_service.admission import authorize, placed
from bridge.commands.model import CommandError, parse_command
from tests.support.commands_twin import OTHER, SID
from tests.support.door_twins import claims


def _code(f: object) -> str:
    with pytest.raises(CommandError) as e:
        f()  # type: ignore[operator]
    return e.value.code


def test_a_read_token_may_not_prompt_and_a_prompt_token_may_not_interrupt() -> None:
    prompt = parse_command("prompt", {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID)
    interrupt = parse_command("interrupt", {"command_id": "c2"}, SID)
    assert _code(lambda: authorize(claims("read"), prompt)) == "forbidden"
    authorize(claims("prompt"), prompt)
    assert _code(lambda: authorize(claims("prompt"), interrupt)) == "forbidden"
    authorize(claims("control"), interrupt)


def test_a_token_limited_to_sessions_reaches_those_only_and_creates_none() -> None:
    mine = claims(sessions=frozenset({SID}))
    authorize(mine, parse_command("prompt", {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID))
    other = parse_command("prompt", {"command_id": "c1", "text": "hi", "delivery": "steer"}, OTHER)
    assert _code(lambda: authorize(mine, other)) == "forbidden"
    create = parse_command("create_session", {"command_id": "c", "directory": "/srv/a"})
    assert _code(lambda: authorize(mine, create)) == "forbidden"


@pytest.mark.parametrize(("approve", "limited", "reply", "allowed"), [
    ("none", False, "reject", True), ("none", False, "once", False), ("once", False, "once", True),
    ("once", False, "always", False), ("always", False, "always", True), ("always", True, "always", False),
])
def test_a_permission_reply_needs_the_approval_right(approve: str, limited: bool, reply: str,
                                                     allowed: bool) -> None:
    token = claims(approve=approve, sessions=frozenset({SID}) if limited else None)
    cmd = parse_command("permission_reply", {"command_id": "c", "reply": reply}, SID, "per_1")
    if allowed:
        authorize(token, cmd)
    else:
        assert _code(lambda: authorize(token, cmd)) == "forbidden"


def test_a_new_session_directory_is_checked_and_resolved_other_commands_pass_unchanged() -> None:
    create = parse_command("create_session", {"command_id": "c", "directory": "/srv/agent/link"})
    got = placed(create, ("/srv/agent",), lambda p: p.replace("link", "real"))
    assert got.args["directory"] == "/srv/agent/real"
    assert _code(lambda: placed(create, (), None)) == "forbidden"  # session creation off
    assert _code(lambda: placed(create, ("/srv/other",), None)) == "forbidden"
    assert _code(lambda: placed(create, ("/srv/agent",), lambda p: "/etc" if "link" in p else p)) == "forbidden"
    prompt = parse_command("prompt", {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID)
    assert placed(prompt, (), None) is prompt
