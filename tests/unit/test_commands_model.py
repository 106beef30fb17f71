"""The pure core of the commands: derived upstream ids, fingerprints, the scope matrix, token scopes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bridge.auth import mint_token, verify_token
from bridge.commands import CommandError, RateLimiter, parse_command, scope_allows
from bridge.commands.model import upstream_message_id, upstream_session_id, v2_prompt_message_id
from bridge.errors import AuthError
from bridge.ids import valid_session_id

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"


def test_message_id_has_the_serves_shape_and_depends_on_the_command() -> None:
    # x6: the serve's ids look like msg_22a47d535001o65INCu84jsLQJ; the time part sorts with them.
    mid = upstream_message_id("u", SID, "c-1", 1796005680438, "alice")
    assert mid.startswith("msg_22a47d536") and len(mid) == len("msg_22a47d535001o65INCu84jsLQJ")
    assert mid == upstream_message_id("u", SID, "c-1", 1796005680438, "alice")
    assert mid[16:] != upstream_message_id("u", SID, "c-2", 1796005680438, "alice")[16:]
    assert mid[16:] != upstream_message_id("u2", SID, "c-1", 1796005680438, "alice")[16:]
    # Command ids are per subject: two subjects' equal ids never meet upstream.
    assert mid[16:] != upstream_message_id("u", SID, "c-1", 1796005680438, "bob")[16:]


def test_v2_prompt_id_is_a_pure_function_of_what_a_retry_repeats() -> None:
    """No clock in it: a retry whose row was lost derives the very same id (docs/commands.md)."""
    mid = v2_prompt_message_id("u", SID, "c-1", "alice")
    assert mid == v2_prompt_message_id("u", SID, "c-1", "alice")
    assert mid.startswith("msg_") and len(mid) == len("msg_22a47d535001o65INCu84jsLQJ")
    assert all(c in "0123456789abcdef" for c in mid[4:16])
    others = {v2_prompt_message_id(*a) for a in (("u2", SID, "c-1", "alice"), ("u", SID, "c-2", "alice"),
                                                 ("u", SID, "c-1", "bob"), ("u", SID[:-1] + "X", "c-1", "alice"))}
    assert mid not in others and len(others) == 4
    # the same digest as the time-stamped (legacy) id: the mirror's look-up by digest finds either
    assert mid[16:] == upstream_message_id("u", SID, "c-1", 1796005680438, "alice")[16:]


def test_session_id_sorts_newest_first_and_passes_the_id_rule() -> None:
    older, newer = (upstream_session_id("u", "c", t, "alice") for t in (1796005680120, 1796005690120))
    assert valid_session_id(older) and newer < older
    assert older[16:] != upstream_session_id("u", "c", 1796005680120, "bob")[16:]


def test_fingerprint_ignores_extra_keys_but_not_meaning() -> None:
    a = parse_command("prompt", {"command_id": "c", "text": "hi", "delivery": "queue", "x": 1}, SID)
    b = parse_command("prompt", {"delivery": "queue", "text": "hi", "command_id": "c"}, SID)
    c = parse_command("prompt", {"command_id": "c", "text": "hi", "delivery": "steer"}, SID)
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_delivery_is_required() -> None:
    with pytest.raises(CommandError) as e:
        parse_command("prompt", {"command_id": "c", "text": "hi"}, SID)
    assert e.value.status == 400


@pytest.mark.parametrize(("scope", "allowed"), [
    ("read", set()),
    ("prompt", {"prompt", "permission_reply", "question_reply", "question_reject"}),
    ("control", {"prompt", "permission_reply", "question_reply", "question_reject", "interrupt", "model", "agent",
                 "create_session", "title", "revert", "unrevert", "fork", "slash_command", "erase"}),
])
def test_scope_matrix(scope: str, allowed: set[str]) -> None:
    names = {"prompt", "permission_reply", "question_reply", "question_reject", "interrupt", "model", "agent",
             "create_session", "title", "revert", "unrevert", "fork", "slash_command", "erase"}
    if scope == "prompt":
        allowed = allowed | {"slash_command"}  # a slash command is a prompt
    assert {n for n in names if scope_allows(scope, n)} == allowed


def test_tokens_without_a_scope_are_read_and_unknown_scopes_are_refused() -> None:
    secret = "s" * 40
    assert verify_token(mint_token(secret, "u", ttl_s=60), secret, "u").scope == "read"
    control = mint_token(secret, "u", ttl_s=60, scope="control", subject="ops")
    assert verify_token(control, secret, "u").scope == "control"
    import jwt
    now = int(time.time())
    forged = jwt.encode({"iss": "opencode-bridge", "upstream": "u", "iat": now, "exp": now + 60, "jti": "j",
                         "sub": "x", "scope": "root"}, secret)
    with pytest.raises(AuthError):
        verify_token(forged, secret, "u")


def test_rate_limiter_bucket() -> None:
    t = [0.0]
    rl = RateLimiter(rate_per_s=2.0, burst=2, clock=lambda: t[0], max_keys=2)
    assert [rl.take("a") for _ in range(3)] == [0.0, 0.0, 0.5]
    t[0] += 0.5
    assert rl.take("a") == 0.0
    rl.take("b")
    rl.take("c")  # evicts the stalest ("a"): memory stays bounded
    assert rl.take("a") == 0.0


def test_the_command_op_carries_the_http_body_in_the_frame() -> None:
    import json

    from bridge.fanout import protocol as p

    op = p.parse_client_message(json.dumps({"op": "command", "id": 3, "command": "prompt", "session": SID,
                                            "command_id": "c", "text": "hi", "delivery": "queue"}))
    assert op == p.CommandOp("prompt", SID, None, {"command_id": "c", "text": "hi", "delivery": "queue"}, 3)
    with pytest.raises(p.ProtocolError):
        p.parse_client_message('{"op":"command","command":"prompt","session":"../x"}')
    msg = p.command_result_message("prompt", 409, {"error": "conflict", "message": "m"}, "r")
    assert msg == {"type": "command_result", "command": "prompt", "status": 409, "error": "conflict",
                   "message": "m", "id": "r"}


def test_the_token_command_mints_the_asked_scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from bridge.cli import main

    monkeypatch.setenv("BRIDGE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("BRIDGE_AUTH_SECRET", "t" * 40)
    monkeypatch.setenv("BRIDGE_UPSTREAM_NAME", "u")
    scopes = []
    for argv in (["token"], ["token", "--scope", "prompt", "--subject", "web"],
                 ["token", "--scope", "control", "--subject", "ops", "--session", SID]):
        assert main(argv) == 0
        scopes.append(verify_token(capsys.readouterr().out.strip(), "t" * 40, "u").scope)
    assert scopes == ["read", "prompt", "control"]
    # prompt and control need a subject (who the command rows are credited to); --subject "" is refused.
    for argv in (["token", "--scope", "prompt"], ["token", "--subject", " "],
                 ["token", "--scope", "control", "--subject", "ops", "--approve", "always", "--session", SID]):
        assert main(argv) == 2, argv
    with pytest.raises(SystemExit):
        main(["token", "--scope", "admin"])


async def test_upstream_command_calls_send_json_with_the_location_and_quoted_paths() -> None:
    import json

    from bridge.errors import SessionNotFound
    from bridge.upstream.client import UpstreamClient
    from bridge.upstream.commands import UpstreamCommands
    from bridge.upstream.transport import MockTransport, Request, Response
    from tests.support.memory_upstream import json_response

    async def handler(request: Request) -> Response:
        if "reply" in request.path and "per%2F" in request.path:
            return json_response(404, {"_tag": "PermissionNotFoundError", "message": "Permission request not found"})
        return json_response(200, {"data": {"admittedSeq": 3, "id": "msg_1"}})

    transport = MockTransport(handler)
    async with UpstreamClient("http://up", transport=transport) as client:
        up = UpstreamCommands(client)
        assert await up.prompt(SID, "/srv/é dir", "msg_1", "hi", "queue") == (200, {"admittedSeq": 3, "id": "msg_1"})
        with pytest.raises(SessionNotFound):
            await up.reply_legacy("/srv/p", "per/../x", "once")
    sent = transport.requests[0]
    assert sent.method == "POST" and sent.path.startswith(f"/api/session/{SID}/prompt?location%5Bdirectory%5D=")
    assert sent.headers["Content-Type"] == "application/json" and sent.body is not None
    assert json.loads(sent.body) == {"id": "msg_1", "prompt": {"text": "hi"}, "delivery": "queue"}
    assert transport.requests[1].path.startswith("/permission/per%2F..%2Fx/reply?")


@pytest.mark.parametrize("extra", [{"model": "mock/mock-1"}, {"model": {"provider_id": "mock", "model_id": "mock-1"}},
                                   {"provider_id": "mock", "model_id": "mock-1"}])
def test_create_session_takes_the_model_in_any_documented_form(extra: dict[str, object]) -> None:
    cmd = parse_command("create_session", {"command_id": "c", "directory": "/srv/p", **extra})
    assert cmd.args == {"directory": "/srv/p", "provider_id": "mock", "model_id": "mock-1"}


@pytest.mark.parametrize("extra", [{"model": "mock"}, {"model": 3}, {"provider_id": "mock"},
                                   {"model": {"provider_id": "a/b", "model_id": "m"}}])
def test_create_session_refuses_a_malformed_model(extra: dict[str, object]) -> None:
    with pytest.raises(CommandError):
        parse_command("create_session", {"command_id": "c", "directory": "/srv/p", **extra})


@pytest.mark.parametrize("body", [
    {"command_id": "c"},
    {"command_id": "c", "answers": []},
    {"command_id": "c", "answers": "Red"},
    {"command_id": "c", "answers": ["Red"]},
    {"command_id": "c", "answers": [["Red"]] * 51},
])
def test_a_question_reply_needs_a_list_of_answer_lists(body: dict[str, object]) -> None:
    with pytest.raises(CommandError) as e:
        parse_command("question_reply", body, SID, "que_1")
    assert e.value.status == 400


def test_question_commands_take_the_request_id_from_the_path() -> None:
    reply = parse_command("question_reply", {"command_id": "c", "answers": [["Red"]], "x": 1}, SID, "que_1")
    assert dict(reply.args) == {"request_id": "que_1", "answers": [["Red"]]}
    reject = parse_command("question_reject", {"command_id": "c"}, SID, "que_1")
    assert dict(reject.args) == {"request_id": "que_1"} and reject.fingerprint != reply.fingerprint
    with pytest.raises(CommandError):
        parse_command("question_reject", {"command_id": "c"}, SID, "que/1")


def test_erase_takes_a_reason_and_an_optional_upstream_flag() -> None:
    sid = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"
    cmd = parse_command("erase", {"command_id": "e-1", "reason": "user request", "upstream": False}, sid)
    assert (cmd.session_id, dict(cmd.args)) == (sid, {"reason": "user request"})
    same = parse_command("erase", {"command_id": "e-1", "reason": "user request"}, sid)
    assert same.fingerprint == cmd.fingerprint  # `upstream: false` and no flag mean the same
    assert dict(parse_command("erase", {"command_id": "e-1", "reason": "r", "upstream": True}, sid).args) == {
        "reason": "r", "upstream": True}
    for bad in ({"command_id": "e-1"}, {"command_id": "e-1", "reason": ""}, {"command_id": "e-1", "reason": "x" * 1001},
                {"command_id": "e-1", "reason": "r", "upstream": "yes"}):
        with pytest.raises(CommandError) as e:
            parse_command("erase", bad, sid)
        assert e.value.code == "bad_request"
