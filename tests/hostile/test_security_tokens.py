"""Forged and leaked tokens (docs/security.md, "Tokens"): one forged token per claim rule, refused on the
verifier, on a command route and on the WebSocket; revocation through the database, on HTTP and on an
open socket; the CLI's `--revoke`; the per-start token of BRIDGE_AUTH_DISABLED=true."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import MAX_TTL_S, mint_token, verify_token
from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.rows import DoorStore
from bridge.config import Settings
from bridge.errors import AuthError
from bridge.fanout import protocol as p
from bridge.fanout.service import print_local_token
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.revocation import RevocationList
from bridge.store.commands_pending import PromptQueueStore
from bridge.store.revoked import revoke, revoked_jtis
from tests.support.commands_twin import SID, UpstreamCommandsTwin
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import SECRET, UPSTREAM, Node

NOW = int(time.time())
# Valid for the longest time allowed: the suite may reach these tests many minutes after this module loads.
GOOD: dict[str, Any] = {"iss": "opencode-bridge", "upstream": UPSTREAM, "iat": NOW, "exp": NOW + int(MAX_TTL_S),
                        "jti": "j-1", "sub": "alice", "scope": "prompt"}
DROP = object()

# One forged token per claim rule: (what is changed) -> the claims. Signed with the right key: only the
# rules can refuse them.
FORGED: dict[str, dict[str, Any]] = {
    "no exp": {"exp": DROP},
    "exp NaN": {"exp": float("nan")},
    "exp Infinity": {"exp": float("inf")},
    "exp a string": {"exp": "2099-01-01"},
    "exp true": {"exp": True},
    "exp ten years on": {"exp": NOW + 10 * 365 * 86400},
    "exp one second over 30 days": {"exp": NOW + int(MAX_TTL_S) + 1},
    "exp before iat": {"exp": NOW - 1, "iat": NOW},
    "expired": {"iat": NOW - 1000, "exp": NOW - 1},
    "no iat": {"iat": DROP},
    "iat NaN": {"iat": float("nan")},
    "iat in the future": {"iat": NOW + 3600, "exp": NOW + 7200},
    "iat -Infinity": {"iat": float("-inf")},
    "no jti": {"jti": DROP},
    "empty jti": {"jti": ""},
    "jti with a newline": {"jti": "a\nb"},
    "jti not a string": {"jti": 7},
    "jti too long": {"jti": "j" * 65},
    "prompt without sub": {"sub": DROP},
    "control with an empty sub": {"sub": "", "scope": "control"},
    "sub with ESC": {"sub": "\x1b[2Jroot"},
    "sub not a string": {"sub": ["alice"]},
    "unknown scope": {"scope": "admin"},
    "approve on a read token": {"scope": "read", "approve": "once"},
    "approve always limited to sessions": {"approve": "always", "sessions": [SID]},
    "unknown approve": {"approve": "yes"},
    "sessions not a list": {"sessions": SID},
    "a hostile session id": {"sessions": ["ses_a/../x"]},
    "another issuer": {"iss": "someone-else"},
    "another upstream": {"upstream": "elsewhere"},
}


def forge(change: dict[str, Any], key: str = SECRET, alg: str = "HS256") -> str:
    claims = {k: v for k, v in {**GOOD, **change}.items() if v is not DROP}
    return jwt.encode(claims, key, algorithm=alg)


def test_the_unforged_token_is_good() -> None:
    claims = verify_token(forge({}), SECRET, UPSTREAM)
    # no `approve` claim: the CLI's default for the scope (bridge.auth.default_approve)
    assert (claims.subject, claims.scope, claims.approve, claims.jti) == ("alice", "prompt", "once", "j-1")


@pytest.mark.parametrize("rule", FORGED)
def test_a_forged_token_is_refused_by_the_verifier(rule: str) -> None:
    with pytest.raises(AuthError) as e:
        verify_token(forge(FORGED[rule]), SECRET, UPSTREAM)
    assert e.value.code in ("invalid", "expired", "wrong_upstream"), rule


def test_other_algorithms_and_keys_are_refused() -> None:
    for token in (forge({}, "x" * 40), forge({}, SECRET * 2, "HS512"),
                  jwt.encode({**GOOD}, None, algorithm="none")):  # type: ignore[arg-type]
        with pytest.raises(AuthError) as e:
            verify_token(token, SECRET, UPSTREAM)
        assert e.value.code == "invalid"


async def test_forged_tokens_are_401_on_a_command_route_and_nothing_is_sent(engine: AsyncEngine) -> None:
    twin = UpstreamCommandsTwin()
    service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]  # the twin is a v2 serve
                             DoorSettings(exit_after_upstream="", prompt_runtime="v2"),
                             queue=PromptQueueStore(engine, UPSTREAM))
    app = web.Application()
    add_command_routes(app, CommandsContext(service, SECRET))
    async with TestClient(TestServer(app)) as http:
        for rule, change in FORGED.items():
            body = {"command_id": "f", "text": "hi", "delivery": "queue"}
            r = await http.post(f"/v1/sessions/{SID}/prompt", json=body,
                                headers={"Authorization": f"Bearer {forge(change)}"})
            code = "token_expired" if rule == "expired" else "unauthorized"
            assert (r.status, (await r.json())["error"]["code"]) == (401, code), rule
    assert twin.calls == []


async def test_forged_tokens_are_closed_4401_or_4402_on_the_websocket(nodes: Callable[..., Any],
                                                                     clients: list[WsClient]) -> None:
    node: Node = await nodes()
    for rule, change in FORGED.items():
        c = await WsClient.connect(node.url, forge(change))
        clients.append(c)
        want = p.CLOSE_TOKEN_EXPIRED if rule == "expired" else p.CLOSE_UNAUTHORIZED
        assert await c.wait_closed() == want, rule
    assert node.service.slots.open == 0  # none of them ever held a slot


async def test_a_revoked_token_is_refused_on_http_and_its_open_socket_is_closed(
    engine: AsyncEngine, nodes: Callable[..., Any], clients: list[WsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bridge.http.ws.REVOCATION_CHECK_S", 0.05)
    revocations = RevocationList(lambda: revoked_jtis(engine))
    await revocations.refresh()
    node: Node = await nodes()
    node.service.revoked = revocations.revoked
    leaked = mint_token(SECRET, UPSTREAM, None, 600, "alice", scope="prompt", jti="leaked-1")
    other = mint_token(SECRET, UPSTREAM, None, 600, "bob", scope="prompt", jti="kept-1")
    open_socket = await WsClient.connect(node.url, leaked)
    bystander = await WsClient.connect(node.url, other)
    clients.extend([open_socket, bystander])
    await open_socket.wait_for("hello")
    twin = UpstreamCommandsTwin()
    service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]  # the twin is a v2 serve
                             DoorSettings(exit_after_upstream="", prompt_runtime="v2"),
                             queue=PromptQueueStore(engine, UPSTREAM))
    app = web.Application()
    add_command_routes(app, CommandsContext(service, SECRET, revoked=revocations.revoked))
    async with TestClient(TestServer(app)) as http:
        body = {"command_id": "r", "text": "hi", "delivery": "queue"}
        headers = {"Authorization": f"Bearer {leaked}"}
        assert (await http.post(f"/v1/sessions/{SID}/prompt", json=body, headers=headers)).status == 200
        assert await revoke(engine, "leaked-1", "laptop stolen") and not await revoke(engine, "leaked-1")
        await revocations.refresh()
        r = await http.post(f"/v1/sessions/{SID}/prompt", json={**body, "command_id": "r2"}, headers=headers)
        assert (r.status, (await r.json())["error"]["code"]) == (401, "token_revoked") and "revoked" in (await r.text())
    assert await open_socket.wait_closed(5) == p.CLOSE_UNAUTHORIZED
    assert any(m.get("code") == p.ERR_TOKEN_REVOKED for m in open_socket.of("error"))
    again = await WsClient.connect(node.url, leaked)
    clients.append(again)
    assert await again.wait_closed() == p.CLOSE_UNAUTHORIZED
    await bystander.send(op="ping", id="still")
    await bystander.wait_for("pong", id="still")  # another token's socket is untouched
    assert twin.count("prompt") == 1


def test_the_cli_revokes_into_the_database(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from bridge.cli import main

    monkeypatch.setenv("BRIDGE_DATABASE_URL", database_url)
    monkeypatch.setenv("BRIDGE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("BRIDGE_AUTH_SECRET", SECRET)
    monkeypatch.setenv("BRIDGE_UPSTREAM_NAME", UPSTREAM)
    assert main(["token", "--scope", "prompt", "--subject", "web"]) == 0
    out = capsys.readouterr()
    jti = verify_token(out.out.strip(), SECRET, UPSTREAM).jti
    assert not jti.startswith("-")
    printed = out.err.split("revoke: ", 1)[1].split(")")[0].split()
    assert printed[:3] == ["opencode-bridge", "token", f"--revoke={jti}"]
    assert main([*printed[1:], "--reason", "test"]) == 0  # the printed command, as a shell would split it
    dashed = "-Ab3_dashed"  # an older token's id may begin with "-": the `=` form still takes it
    assert main(["token", f"--revoke={dashed}"]) == 0
    assert main(["token", "--revoke", "bad\njti"]) == 2
    import asyncio

    from bridge.store.db import make_engine

    async def listed() -> frozenset[str]:
        engine = make_engine(database_url, pool_size=1)
        try:
            return await revoked_jtis(engine)
        finally:
            await engine.dispose()

    assert {jti, dashed} <= asyncio.run(listed())


def test_auth_disabled_prints_a_per_start_control_token_and_nothing_passes_without_one(
    capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(upstream_name=UPSTREAM, auth_disabled=True, http_port=8799)
    token = print_local_token(settings, "p" * 48)
    err = capsys.readouterr().err
    assert f"http://127.0.0.1:8799/?token={token}" in err
    claims = verify_token(token, "p" * 48, UPSTREAM)
    assert (claims.scope, claims.approve, claims.sessions) == ("control", "always", None)
    with pytest.raises(AuthError):
        verify_token(token, "q" * 48, UPSTREAM)  # the next start's secret: yesterday's token is dead
    with pytest.raises(AuthError):
        verify_token(None, "p" * 48, UPSTREAM)
