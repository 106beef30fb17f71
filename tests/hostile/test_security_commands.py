"""Attacks on the command door as a browser or a leaked token would try them (docs/security.md): any
directory, approvals with a prompt or session-limited token, cross-site POSTs, another caller's command
ids, control characters in ids, upstream details in errors. Each is refused with its error, nothing
reaches the fake upstream (its call log stays empty), and nothing answers 500.

The app is the daemon's (`build_app`: Host check and write guard) with the command routes mounted."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from bridge.auth import mint_token
from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.rows import DoorStore
from bridge.commands.ratelimit import RateLimiter
from bridge.errors import UpstreamError
from bridge.http.app import build_app
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.store.commands_pending import PromptQueueStore
from tests.integration.test_commands_http import SECRET, UPSTREAM
from tests.support.commands_twin import OTHER, SID, UpstreamCommandsTwin

ORIGIN = "https://chat.example"


class Door:
    def __init__(self, http: TestClient[Any, Any], twin: UpstreamCommandsTwin, root: Path) -> None:
        self.http, self.twin, self.root = http, twin, root

    async def post(self, path: str, body: Any, token: str, **headers: str) -> tuple[int, dict[str, Any]]:
        r = await self.http.post(path, json=body, headers={"Authorization": f"Bearer {token}", **headers})
        assert r.status < 500 or r.status == 503, await r.text()  # 503: the upstream is away (documented)
        return r.status, await r.json()


def tok(scope: str = "control", sessions: list[str] | None = None, subject: str = "alice",
        approve: str | None = None) -> str:
    return mint_token(SECRET, UPSTREAM, sessions, 600, subject, scope=scope, approve=approve)


async def _ready() -> dict[str, Any]:
    return {"started": {"ok": True}}


@pytest.fixture
async def make_door(engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    made: list[TestClient[Any, Any]] = []

    async def make(roots: tuple[str, ...] | None = None) -> Door:
        root = tmp_path / "projects"
        (root / "app").mkdir(parents=True, exist_ok=True)
        twin = UpstreamCommandsTwin()
        service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]  # the twin is a v2 serve
                                 DoorSettings(exit_after_upstream="",
                                              directories=(str(root),) if roots is None else roots,
                                              resolve=os.path.realpath, prompt_runtime="v2"),
                                 limiter=RateLimiter(rate_per_s=100, burst=1000),
                                 queue=PromptQueueStore(engine, UPSTREAM))
        app = build_app(_ready, allowed_origins=frozenset({ORIGIN}))
        add_command_routes(app, CommandsContext(service, SECRET))
        client: TestClient[Any, Any] = TestClient(TestServer(app))
        await client.start_server()
        made.append(client)
        return Door(client, twin, root)

    yield make
    for c in made:
        await c.close()


async def command_rows(engine: AsyncEngine) -> list[tuple[str, str, str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(text("SELECT subject, command_id, state FROM chat_commands ORDER BY created_at"))
        return [tuple(r) for r in rows]  # type: ignore[misc]


# --- 1. directories ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("directory", "status"), [
    ("/", 403), ("/etc", 403), ("/root", 403), ("/srv/a/../../..", 400), ("//etc", 400), ("/tmp", 403),
    ("{root}/../..", 400), ("{root}/app/", 400), ("{root}/a\nb", 400), ("{root}/a\rb", 400),
    ("{root}/\x1b[2Jclear", 400), ("{root}/a\x00b", 400), ("{root}-evil", 403), ("relative/app", 400),
    ("{root}/escape", 403), ("{root}/escape/deeper", 403),
])
async def test_a_session_outside_the_allowed_directories_is_refused_and_nothing_is_created(
    make_door: Callable[..., Any], engine: AsyncEngine, tmp_path: Path, directory: str, status: int
) -> None:
    door: Door = await make_door()
    (tmp_path / "outside").mkdir(exist_ok=True)
    if not (door.root / "escape").exists():
        (door.root / "escape").symlink_to(tmp_path / "outside")  # inside by name, outside once resolved
    got = await door.post("/v1/sessions", {"command_id": "s-1", "directory": directory.format(root=door.root)},
                          tok())
    assert got[0] == status and got[1]["error"]["code"] == ("forbidden" if status == 403 else "bad_request"), got
    assert door.twin.calls == [] and await command_rows(engine) == []


async def test_unset_allowed_directories_refuses_every_session_naming_the_variable(
    make_door: Callable[..., Any], engine: AsyncEngine
) -> None:
    door: Door = await make_door(roots=())
    status, body = await door.post("/v1/sessions", {"command_id": "s", "directory": str(door.root / "app")}, tok())
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert "BRIDGE_ALLOWED_DIRECTORIES" in body["error"]["message"]
    assert door.twin.calls == [] and await command_rows(engine) == []


async def test_a_session_inside_a_root_is_created_at_its_resolved_path(make_door: Callable[..., Any]) -> None:
    door: Door = await make_door()
    (door.root / "alias").symlink_to(door.root / "app")
    status, body = await door.post("/v1/sessions", {"command_id": "s", "directory": str(door.root / "alias")}, tok())
    assert status == 201 and body["directory"] == str(door.root / "app")
    assert door.twin.calls == [("create", (body["session_id"], str(door.root / "app")))]


# --- 2. approvals: the scope matrix with the approve right ---------------------------------------------------

# (scope, approve, limited to the session) -> the replies it may send; `reject` needs no approve right.
APPROVALS: list[tuple[str, str | None, bool, set[str]]] = [
    ("read", None, False, set()),
    ("prompt", "none", False, {"reject"}),
    ("prompt", None, True, {"once", "reject"}),  # the default: one token for "user prompts, user approves once"
    ("prompt", None, False, {"once", "reject"}),
    ("prompt", "always", False, {"once", "always", "reject"}),
    ("control", "none", False, {"reject"}),
    ("control", None, True, {"once", "reject"}),
    ("control", "always", False, {"once", "always", "reject"}),
]


@pytest.mark.parametrize(("scope", "approve", "limited", "allowed"), APPROVALS)
async def test_the_scope_matrix_of_permission_replies(make_door: Callable[..., Any], scope: str, approve: str | None,
                                                      limited: bool, allowed: set[str]) -> None:
    door: Door = await make_door()
    token = tok(scope, [SID] if limited else None, approve=approve)
    for n, reply in enumerate(("once", "always", "reject")):
        door.twin.v2_pending = [{"id": f"per_{n}", "sessionID": SID}]
        status, body = await door.post(f"/v1/sessions/{SID}/permissions/per_{n}/reply",
                                       {"command_id": f"p{n}", "reply": reply}, token)
        if reply in allowed:
            assert status == 200 and body["applied"], (reply, body)
        else:
            assert (status, body["error"]["code"]) == (403, "forbidden"), (reply, body)
    assert {args[2] for name, args in door.twin.calls if name == "reply_v2"} == allowed


def test_always_cannot_be_minted_for_a_session_limited_token_and_prompt_needs_a_subject() -> None:
    with pytest.raises(ValueError, match="not limited to sessions"):
        tok("prompt", [SID], approve="always")
    with pytest.raises(ValueError, match="cannot approve"):
        tok("read", approve="once")
    with pytest.raises(ValueError, match="needs a subject"):
        tok("prompt", subject="")


async def test_prompt_does_not_grant_control_commands_and_a_limited_token_cannot_create(
    make_door: Callable[..., Any]
) -> None:
    door: Door = await make_door()
    for path, body in ((f"/v1/sessions/{SID}/interrupt", {"command_id": "i"}),
                       (f"/v1/sessions/{SID}/agent", {"command_id": "a", "agent": "build"}),
                       ("/v1/sessions", {"command_id": "s", "directory": str(door.root / "app")})):
        assert (await door.post(path, body, tok("prompt", approve="always")))[0] == 403, path
    status, _ = await door.post("/v1/sessions", {"command_id": "s", "directory": str(door.root / "app")},
                                tok("control", [SID]))
    assert status == 403 and door.twin.calls == []


# --- 3. CSRF and the Host check ----------------------------------------------------------------------------

async def test_a_cross_site_post_is_refused_whatever_its_content_type(make_door: Callable[..., Any],
                                                                       engine: AsyncEngine) -> None:
    door: Door = await make_door()
    path, body = f"/v1/sessions/{SID}/prompt", {"command_id": "x", "text": "rm -rf ~", "delivery": "queue"}
    auth = {"Authorization": f"Bearer {tok()}"}
    r = await door.http.post(path, json=body, headers={**auth, "Origin": "https://evil.example"})
    assert (r.status, (await r.json())["error"]["code"]) == (403, "bad_origin")
    r = await door.http.post(path, json=body, headers={**auth, "Origin": "null"})
    assert r.status == 403
    # A "simple" request a page can send with mode: 'no-cors' (no preflight): not application/json.
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""):
        r = await door.http.post(path, data=b'{"command_id":"x","text":"hi","delivery":"queue"}',
                                 headers={**auth, "Content-Type": ctype} if ctype else auth)
        assert (r.status, (await r.json())["error"]["code"]) == (415, "unsupported_media_type"), ctype
    assert door.twin.calls == [] and await command_rows(engine) == []
    # The allowed origin, the same origin, and a non-browser client (no Origin) are served.
    port = door.http.port
    for origin in (ORIGIN, f"http://127.0.0.1:{port}", None):
        headers = {**auth, **({"Origin": origin} if origin else {})}
        r = await door.http.post(path, json={**body, "command_id": f"ok-{origin}"}, headers=headers)
        assert r.status == 200, (origin, await r.text())


async def test_a_dns_rebound_page_reads_nothing_and_posts_nothing(make_door: Callable[..., Any]) -> None:
    door: Door = await make_door()
    port = door.http.port
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    for path in ("/metrics", "/readyz", "/livez"):
        r = await door.http.get(path, headers={"Host": f"evil.example:{port}"})
        assert r.status == 403 and (await r.json())["error"]["code"] == "bad_host", path
    r = await door.http.post(f"/v1/sessions/{SID}/prompt", json={"command_id": "x", "text": "hi", "delivery": "queue"},
                             headers={"Authorization": f"Bearer {tok()}", **rebound})
    assert r.status == 403 and door.twin.calls == []


# --- 4. command ids belong to their subject and session -------------------------------------------------------

async def test_another_callers_command_ids_are_invisible_and_cannot_be_squatted(
    make_door: Callable[..., Any], engine: AsyncEngine
) -> None:
    door: Door = await make_door()
    path = f"/v1/sessions/{SID}/prompt"
    alice, bob = tok("prompt", subject="alice"), tok("prompt", subject="bob")
    # bob squats the id alice is about to use, with another text: no 409 for either, both sent.
    s_bob, b_bob = await door.post(path, {"command_id": "c-1", "text": "bob", "delivery": "queue"}, bob)
    s_alice, b_alice = await door.post(path, {"command_id": "c-1", "text": "alice", "delivery": "queue"}, alice)
    assert s_bob == s_alice == 200 and b_bob["message_id"] != b_alice["message_id"]
    # exactly once still holds per subject: alice's retry is answered from her row, nothing sent again
    again = await door.post(path, {"command_id": "c-1", "text": "alice", "delivery": "queue"}, alice)
    assert again == (200, b_alice) and door.twin.count("prompt") == 2
    # the same subject's id on another session is another command
    status, _ = await door.post(f"/v1/sessions/{OTHER}/prompt", {"command_id": "c-1", "text": "alice",
                                                                 "delivery": "queue"}, alice)
    assert status == 200 and door.twin.count("prompt") == 3
    assert sorted(await command_rows(engine)) == [("alice", "c-1", "done")] * 2 + [("bob", "c-1", "done")]


async def test_a_pending_command_is_never_resent_on_behalf_of_another_subject(
    make_door: Callable[..., Any], engine: AsyncEngine
) -> None:
    door: Door = await make_door()
    path, body = f"/v1/sessions/{SID}/prompt", {"command_id": "p-1", "text": "hi", "delivery": "queue"}
    door.twin.fail_prompt = UpstreamError("connection reset", None)
    assert (await door.post(path, body, tok("prompt", subject="alice")))[0] == 503  # alice's row stays pending
    door.twin.fail_prompt = None
    status, got = await door.post(path, body, tok("prompt", subject="mallory"))
    assert status == 200
    mids = [args[2] for name, args in door.twin.calls if name == "prompt"]
    assert mids[1] == got["message_id"] != mids[0]  # mallory's own message, not alice's re-sent
    assert ("alice", "p-1", "pending") in await command_rows(engine)


# --- 7. printable ids, generic errors ------------------------------------------------------------------------

@pytest.mark.parametrize("command_id", ["a\nb", "a\r\nINFO forged", "\x1b[31mred", "tab\there", " lead", "trail ",
                                        "a\u2028b", "x\x00"])
async def test_command_ids_with_control_characters_are_refused(make_door: Callable[..., Any], engine: AsyncEngine,
                                                               command_id: str) -> None:
    door: Door = await make_door()
    status, body = await door.post(f"/v1/sessions/{SID}/prompt",
                                   {"command_id": command_id, "text": "hi", "delivery": "queue"}, tok())
    assert (status, body["error"]["code"]) == (400, "bad_request")
    assert door.twin.calls == [] and await command_rows(engine) == []


async def test_upstream_details_stay_in_the_log_under_a_correlation_id(make_door: Callable[..., Any]) -> None:
    door: Door = await make_door()
    secret_detail = "POST http://opencode.internal:4096/api/session/x/prompt: HTTP 502 Bad Gateway (nginx/1.2)"
    door.twin.fail_prompt = UpstreamError(secret_detail, 502)
    with capture_logs() as logs:
        status, body = await door.post(f"/v1/sessions/{SID}/prompt",
                                       {"command_id": "e", "text": "hi", "delivery": "queue"}, tok())
    assert (status, body["error"]["code"]) == (503, "upstream_unavailable")
    assert "opencode.internal" not in str(body) and "502" not in body["error"]["message"]
    ref = body["error"]["correlation_id"]
    assert ref in body["error"]["message"]
    assert any(e.get("correlation_id") == ref and "opencode.internal" in e["error"] for e in logs)
