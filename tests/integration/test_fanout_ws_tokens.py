"""Token expiry and revocation of open sockets through the one shared sweep (bridge.fanout.token_sweep):
every socket of an expired or revoked token is closed with its code and error; other tokens' sockets stay."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from bridge.auth import mint_token
from bridge.fanout import metrics
from bridge.fanout import protocol as p
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import SECRET, UPSTREAM, Node

SID = "ses_sweep_a"


@pytest.fixture
async def node(nodes: Callable[..., Awaitable[Node]], monkeypatch: pytest.MonkeyPatch) -> Node:
    monkeypatch.setattr("bridge.http.ws.REVOCATION_CHECK_S", 0.1)  # the sweep's look at the revocation list
    return await nodes(own_pool=True)


async def _open(clients: list[WsClient], node: Node, token: str) -> WsClient:
    c = await WsClient.connect(node.url, token)
    clients.append(c)
    await c.subscribe(SID)
    await c.wait_for("caught_up")
    return c


async def _alive(c: WsClient, ref: str) -> None:
    await c.send(op="ping", id=ref)
    await c.wait_for("pong", id=ref)
    assert c.close_code is None


async def test_every_socket_of_an_expired_token_is_closed_4402_and_the_others_stay(
    node: Node, clients: list[WsClient]
) -> None:
    await node.write_seqs(SID, 1, 2)
    short = mint_token(SECRET, UPSTREAM, [SID], 4, jti="short-1")
    shorter = mint_token(SECRET, UPSTREAM, [SID], 3, jti="short-2")
    expiring = [await _open(clients, node, short), await _open(clients, node, short),
                await _open(clients, node, shorter)]
    bystander = await _open(clients, node, node.token([SID]))
    for c in expiring:
        assert await c.wait_closed(timeout=20) == p.CLOSE_TOKEN_EXPIRED
        assert c.of("error")[-1]["code"] == p.ERR_TOKEN_EXPIRED
        assert c.seqs(SID) == [1, 2]
    await _alive(bystander, "after-expiry")
    await node.write_seqs(SID, 3)
    await bystander.wait_for("event", seq=3)


async def test_every_socket_of_a_revoked_token_is_closed_4401_at_once_and_the_others_stay(
    node: Node, clients: list[WsClient]
) -> None:
    revoked: set[str] = set()
    node.service.revoked = revoked.__contains__
    leaked = mint_token(SECRET, UPSTREAM, None, 600, "alice", jti="leaked-sweep")
    kept = mint_token(SECRET, UPSTREAM, None, 600, "bob", jti="kept-sweep")
    victims = [await _open(clients, node, leaked) for _ in range(3)]
    bystanders = [await _open(clients, node, kept) for _ in range(2)]
    before = metrics.WS_REFUSED.labels(reason="revoked")._value.get()
    revoked.add("leaked-sweep")
    for c in victims:
        assert await c.wait_closed(timeout=10) == p.CLOSE_UNAUTHORIZED
        assert c.of("error")[-1]["code"] == p.ERR_TOKEN_REVOKED
    assert metrics.WS_REFUSED.labels(reason="revoked")._value.get() - before == 3
    for i, c in enumerate(bystanders):
        await _alive(c, f"kept-{i}")


async def test_a_reconnect_with_a_token_verified_before_is_refused_once_revoked_or_expired(
    node: Node, clients: list[WsClient]
) -> None:
    """Tokens verified at an earlier connect are kept (bridge.auth.VerifiedTokens): a reconnect skips the
    decode, never the expiry or the revocation list."""
    await node.write_seqs(SID, 1)
    revoked: set[str] = set()
    node.service.revoked = revoked.__contains__
    token = mint_token(SECRET, UPSTREAM, [SID], 600, jti="reconnecting")
    for _ in range(2):  # the second connect finds the token verified already
        c = await _open(clients, node, token)
        await c.close()
    revoked.add("reconnecting")
    refused = await WsClient.connect(node.url, token)
    clients.append(refused)
    assert await refused.wait_closed() == p.CLOSE_UNAUTHORIZED
    revoked.clear()
    now = node.service.now
    node.service.now = lambda: now() + 601  # past the token's expiry
    late = await WsClient.connect(node.url, token)
    clients.append(late)
    assert await late.wait_closed() == p.CLOSE_TOKEN_EXPIRED
