"""The command routes on a real PostgreSQL with an in-memory twin of the upstream: the scope matrix, body
bounds, the rate limiter, exactly-once retries and reuse conflicts, and the audit rows."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.rows import DoorStore
from bridge.commands.model import MAX_BODY_BYTES, MAX_PROMPT_BODY_BYTES, MAX_TEXT_CHARS
from bridge.commands.ratelimit import RateLimiter
from bridge.errors import UpstreamUnavailable
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.store.commands_pending import PromptQueueStore
from tests.support.commands_twin import DIR, OTHER, SID, UpstreamCommandsTwin
from tests.support.serve_model import Clock

from .test_audit_openapi import SPEC, conforms

UPSTREAM = "it-commands"
SECRET = "c" * 40


@pytest.fixture
def twin() -> UpstreamCommandsTwin:
    return UpstreamCommandsTwin()


@pytest.fixture
def clock() -> Clock:
    return Clock(1000.0)


@contextlib.asynccontextmanager
async def command_routes(engine: AsyncEngine, twin: UpstreamCommandsTwin,
                         clock: Clock) -> AsyncIterator[TestClient[Any, Any]]:
    """The command routes on the door (v2 prompts, `/srv/agent` allowed, 6 commands a burst) and the twin."""
    service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]  # the twin is a v2 serve
                             DoorSettings(clock=clock, exit_after_upstream="", directories=("/srv/agent",),
                                          prompt_runtime="v2"),
                             limiter=RateLimiter(rate_per_s=1.0, burst=6, clock=clock),
                             queue=PromptQueueStore(engine, UPSTREAM))
    app = web.Application()
    add_command_routes(app, CommandsContext(service, SECRET))
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.fixture
async def http(engine: AsyncEngine, twin: UpstreamCommandsTwin, clock: Clock) -> AsyncIterator[TestClient[Any, Any]]:
    async with command_routes(engine, twin, clock) as client:
        yield client


def auth(scope: str = "prompt", sessions: list[str] | None = None, subject: str = "alice",
         approve: str | None = None) -> dict[str, str]:
    return {"Authorization": "Bearer " + mint_token(SECRET, UPSTREAM, sessions, 600, subject, scope=scope,
                                                    approve=approve)}


PROMPT = {"command_id": "c-1", "text": "hello", "delivery": "queue"}

# (method path, body) of every command; the scope each needs is in docs/commands.md.
COMMANDS: dict[str, tuple[str, dict[str, Any]]] = {
    "prompt": (f"/v1/sessions/{SID}/prompt", PROMPT),
    "permission_reply": (f"/v1/sessions/{SID}/permissions/per_1/reply", {"command_id": "c-p", "reply": "once"}),
    "interrupt": (f"/v1/sessions/{SID}/interrupt", {"command_id": "c-i"}),
    "model": (f"/v1/sessions/{SID}/model", {"command_id": "c-m", "provider_id": "mock", "model_id": "mock-1"}),
    "agent": (f"/v1/sessions/{SID}/agent", {"command_id": "c-a", "agent": "plan"}),
    "create_session": ("/v1/sessions", {"command_id": "c-s", "directory": DIR}),
}
MATRIX = {"read": set(), "prompt": {"prompt", "permission_reply"}, "control": set(COMMANDS)}


@pytest.mark.parametrize("scope", ["read", "prompt", "control"])
async def test_scope_matrix(http: TestClient[Any, Any], twin: UpstreamCommandsTwin, scope: str) -> None:
    twin.v2_pending = [{"id": "per_1", "sessionID": SID}]
    for name, (path, body) in COMMANDS.items():
        r = await http.post(path, json=body, headers=auth(scope))
        got = await r.json()
        if name in MATRIX[scope]:
            assert r.status in (200, 201), (scope, name, got)
        else:
            assert (r.status, got["error"]["code"]) == (403, "forbidden"), (scope, name, got)
    sent = {n for n, _ in twin.calls} - {"session"}
    assert len(sent) == len(MATRIX[scope])


async def test_a_token_for_another_session_is_forbidden_everywhere(http: TestClient[Any, Any],
                                                                  twin: UpstreamCommandsTwin) -> None:
    for name, (path, body) in COMMANDS.items():
        r = await http.post(path, json=body, headers=auth("control", [OTHER]))
        assert r.status == 403, name
    r = await http.get(f"/v1/sessions/{SID}/commands", headers=auth("read", [OTHER]))
    assert r.status == 403
    assert twin.calls == []


async def test_no_token_or_a_bad_one_is_unauthorized(http: TestClient[Any, Any]) -> None:
    path, body = COMMANDS["prompt"]
    assert (await http.post(path, json=body)).status == 401
    r = await http.post(path, json=body, headers={"Authorization": "Bearer nonsense"})
    assert (r.status, (await r.json())["error"]["code"]) == (401, "unauthorized")


@pytest.mark.parametrize("body", [
    {"command_id": "x", "text": "hi"},  # delivery missing: never an implicit steer
    {"command_id": "x", "text": "hi", "delivery": "now"},
    {"text": "hi", "delivery": "queue"},
    {"command_id": "", "text": "hi", "delivery": "queue"},
    {"command_id": "x" * 101, "text": "hi", "delivery": "queue"},
    {"command_id": "x", "text": "", "delivery": "queue"},
    {"command_id": "x", "text": "a" * (MAX_TEXT_CHARS + 1), "delivery": "queue"},
    {"command_id": "x", "text": "nul\x00", "delivery": "queue"},
    {"command_id": 7, "text": "hi", "delivery": "queue"},
    ["not", "an", "object"],
])
async def test_bad_prompt_bodies_are_400_and_nothing_is_sent(http: TestClient[Any, Any], twin: UpstreamCommandsTwin,
                                                             body: Any) -> None:
    r = await http.post(f"/v1/sessions/{SID}/prompt", json=body, headers=auth())
    assert (r.status, (await r.json())["error"]["code"]) == (400, "bad_request")
    assert twin.count("prompt") == 0


async def test_body_bound(http: TestClient[Any, Any], twin: UpstreamCommandsTwin) -> None:
    big = b'{"command_id":"x","delivery":"queue","text":"' + b"a" * MAX_BODY_BYTES + b'"}'
    r = await http.post(f"/v1/sessions/{SID}/interrupt", data=big, headers=auth("control"))
    assert (r.status, (await r.json())["error"]["message"]) == (400, f"the body is larger than {MAX_BODY_BYTES} bytes")
    # a prompt may carry attachments as data: URLs: its bound is larger (docs/commands.md, "Attachments")
    huge = b'{"command_id":"x","delivery":"queue","text":"' + b"a" * MAX_PROMPT_BODY_BYTES + b'"}'
    r = await http.post(f"/v1/sessions/{SID}/prompt", data=huge, headers=auth())
    too_large = f"the body is larger than {MAX_PROMPT_BODY_BYTES} bytes"
    assert (r.status, (await r.json())["error"]["message"]) == (400, too_large)
    r = await http.post(f"/v1/sessions/{SID}/prompt", data=b"{not json", headers=auth())
    assert r.status == 400
    r = await http.post("/v1/sessions/ses_bad%2F..%2Fx/prompt", json=PROMPT, headers=auth())
    assert r.status in (400, 404)
    assert twin.count("prompt") == 0


async def test_rate_limit_per_token_refills_with_the_clock(http: TestClient[Any, Any], clock: Clock) -> None:
    path = f"/v1/sessions/{SID}/interrupt"
    alice, bob = auth("control", subject="alice"), auth("control", subject="bob")
    statuses = [(await http.post(path, json={"command_id": f"a{i}"}, headers=alice)).status for i in range(8)]
    assert statuses == [200] * 6 + [429] * 2
    r = await http.post(path, json={"command_id": "a9"}, headers=alice)
    assert (r.status, (await r.json())["error"]["code"], r.headers["Retry-After"]) == (429, "rate_limited", "1")
    assert (await http.post(path, json={"command_id": "b0"}, headers=bob)).status == 200  # its own bucket
    clock.now += 1.0
    assert (await http.post(path, json={"command_id": "a10"}, headers=alice)).status == 200
    assert (await http.post(path, json={"command_id": "a11"}, headers=alice)).status == 429


async def test_the_same_command_twice_is_sent_once_and_answered_the_same(http: TestClient[Any, Any],
                                                                         twin: UpstreamCommandsTwin) -> None:
    r1 = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    r2 = await http.post(f"/v1/sessions/{SID}/prompt", json={**PROMPT, "extra": 1}, headers=auth())
    b1, b2 = await r1.json(), await r2.json()
    assert r1.status == r2.status == 200 and b1 == b2
    assert b1["message_id"].startswith("msg_") and len(b1["message_id"]) == 30 and b1["admitted_seq"] == 1
    assert twin.count("prompt") == 1
    r3 = await http.post(f"/v1/sessions/{SID}/prompt", json={**PROMPT, "text": "other"}, headers=auth())
    assert (r3.status, (await r3.json())["error"]["code"]) == (409, "conflict")
    assert twin.count("prompt") == 1
    # Another subject's equal command_id is its own command (docs/security.md): sent, with another message id.
    r4 = await http.post(f"/v1/sessions/{SID}/prompt", json={**PROMPT, "text": "other"}, headers=auth(subject="bob"))
    b4 = await r4.json()
    assert r4.status == 200 and b4["message_id"] != b1["message_id"] and twin.count("prompt") == 2


async def test_a_pending_command_is_resent_with_the_same_message_id(http: TestClient[Any, Any],
                                                                    twin: UpstreamCommandsTwin) -> None:
    twin.fail_prompt = UpstreamUnavailable("connection reset")
    r1 = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert (r1.status, (await r1.json())["error"]["code"]) == (503, "upstream_unavailable")
    twin.fail_prompt = None
    r2 = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert r2.status == 200
    mids = [args[2] for n, args in twin.calls if n == "prompt"]
    assert len(mids) == 2 and mids[0] == mids[1]
    assert len(twin.admitted) == 1


async def test_model_without_credential_is_refused_before_sending(http: TestClient[Any, Any],
                                                                  twin: UpstreamCommandsTwin) -> None:
    r = await http.post(f"/v1/sessions/{SID}/model", headers=auth("control"),
                        json={"command_id": "m", "provider_id": "anthropic", "model_id": "claude-sonnet-4-5"})
    assert r.status == 200
    r = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert (r.status, (await r.json())["error"]["code"]) == (422, "model_unavailable")
    assert twin.count("prompt") == 0


async def test_permission_reply_goes_to_the_runtime_holding_the_request(http: TestClient[Any, Any],
                                                                        twin: UpstreamCommandsTwin) -> None:
    twin.legacy_pending = [{"id": "per_L", "sessionID": SID}]
    r = await http.post(f"/v1/sessions/{SID}/permissions/per_L/reply", json={"command_id": "p1", "reply": "always"},
                        headers=auth(approve="always"))
    assert r.status == 200 and (await r.json())["runtime"] == "legacy"
    assert ("reply_legacy", ("per_L", "always")) in twin.calls and twin.count("reply_v2") == 0
    r = await http.post(f"/v1/sessions/{SID}/permissions/per_X/reply", json={"command_id": "p2", "reply": "once"},
                        headers=auth())
    assert (r.status, (await r.json())["error"]["code"]) == (404, "not_found")


async def test_unknown_session_is_404(http: TestClient[Any, Any]) -> None:
    r = await http.post("/v1/sessions/ses_unknown123/prompt", json=PROMPT, headers=auth())
    assert (r.status, (await r.json())["error"]["code"]) == (404, "not_found")


async def test_commands_are_audited_newest_first(http: TestClient[Any, Any], engine: AsyncEngine) -> None:
    await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth(subject="alice"))
    await http.post(f"/v1/sessions/{SID}/interrupt", json={"command_id": "i-1"}, headers=auth("control", subject="op"))
    r = await http.get(f"/v1/sessions/{SID}/commands", headers=auth("read"))
    rows = (await r.json())["data"]
    assert [(x["command"], x["subject"], x["state"]) for x in rows] == [
        ("interrupt", "op", "done"), ("prompt", "alice", "done")]
    assert rows[1]["admitted_seq"] == 1 and rows[1]["body"] == {"text": "hello", "delivery": "queue"}
    async with engine.connect() as conn:
        n = (await conn.execute(text("SELECT count(*) FROM chat_commands"))).scalar_one()
    assert n == 2


async def test_every_answer_is_documented_in_the_openapi_document(http: TestClient[Any, Any],
                                                                  twin: UpstreamCommandsTwin) -> None:
    twin.v2_pending = [{"id": "per_1", "sessionID": SID}]
    calls: list[tuple[str, Any, dict[str, str]]] = []
    for path, body in COMMANDS.values():
        calls += [(path, body, auth("control")), (path, body, auth("read")), (path, {"command_id": 1}, auth()),
                  (path, body, {})]
    calls += [(COMMANDS["prompt"][0], {**PROMPT, "text": "other"}, auth()),
              ("/v1/sessions/ses_unknown1/interrupt", {"command_id": "u"}, auth("control", subject="zed"))]
    seen: set[int] = set()
    for path, body, headers in calls:
        r = await http.post(path, json=body, headers=headers)
        got = await r.json()
        template = path.replace(SID, "{session_id}").replace("ses_unknown1", "{session_id}").replace(
            "per_1", "{request_id}")
        op = SPEC["paths"][template]["post"]
        assert str(r.status) in op["responses"], (path, r.status, got)
        schema = op["responses"][str(r.status)]["content"]["application/json"]["schema"]
        assert conforms(got, schema) == [], (path, got)
        seen.add(r.status)
    r = await http.get(f"/v1/sessions/{SID}/commands", headers=auth("read"))
    op = SPEC["paths"]["/v1/sessions/{session_id}/commands"]["get"]
    assert conforms(await r.json(), op["responses"]["200"]["content"]["application/json"]["schema"]) == []
    assert {200, 201, 400, 401, 403, 404, 409} <= seen


async def test_a_deleted_session_is_404_and_nothing_is_sent(http: TestClient[Any, Any], twin: UpstreamCommandsTwin,
                                                            engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO chat_sessions (upstream, session_id, directory, deleted) "
                                "VALUES (:u, :s, :d, true)"), {"u": UPSTREAM, "s": SID, "d": DIR})
    r = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert (r.status, (await r.json())["error"]["code"]) == (404, "not_found")
    assert twin.calls == []


async def test_logs_name_the_command_but_never_the_text_or_the_token(http: TestClient[Any, Any]) -> None:
    import structlog

    headers = auth()
    body = {**PROMPT, "command_id": "log-1", "text": "the secret plan"}
    with structlog.testing.capture_logs() as logs:
        assert (await http.post(f"/v1/sessions/{SID}/prompt", json=body, headers=headers)).status == 200
        assert (await http.post(f"/v1/sessions/{SID}/interrupt", json={"command_id": "x"}, headers=headers)).status \
            == 403
    assert [(e["event"], e.get("command")) for e in logs] == [("command_done", "prompt"),
                                                              ("command_refused", "interrupt")]
    dumped = repr(logs)
    assert "secret plan" not in dumped and headers["Authorization"][7:] not in dumped
