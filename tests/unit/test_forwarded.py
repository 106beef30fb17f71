"""BRIDGE_TRUSTED_PROXIES (bridge.forwarded, docs/security.md "Behind a reverse proxy"): whose forwarding
headers are believed, and which address of the chain is the client."""

from __future__ import annotations

import ipaddress

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from bridge.config import load_settings
from bridge.errors import ConfigError
from bridge.forwarded import client_address, forwarded_hops, parse_trusted
from bridge.http.security import protect

PROXY = parse_trusted("10.0.0.0/8, ::1, 127.0.0.1")


@pytest.mark.parametrize(("peer", "hops", "client"), [
    ("10.0.0.5", ["203.0.113.7"], "203.0.113.7"),  # one trusted proxy
    ("10.0.0.5", ["203.0.113.7", "10.1.2.3"], "203.0.113.7"),  # two
    ("10.0.0.5", ["198.51.100.1", "203.0.113.7", "10.1.2.3"], "203.0.113.7"),  # a forged left part is ignored
    ("192.0.2.9", ["203.0.113.7"], "192.0.2.9"),  # an untrusted peer: its headers mean nothing
    ("10.0.0.5", [], "10.0.0.5"),  # no header
    ("10.0.0.5", ["unknown"], "10.0.0.5"), ("10.0.0.5", ["_hidden", "10.9.9.9"], "10.9.9.9"),
    ("10.0.0.5", ["garbage, 1.2.3.4"], "10.0.0.5"),
    ("::1", ["2001:db8::7"], "2001:db8::7"), ("127.0.0.1", ["203.0.113.7:4711"], "203.0.113.7"),
    ("10.0.0.5", ["[2001:db8::7]:4711"], "2001:db8::7"), ("10.0.0.5", ["::ffff:203.0.113.7"], "203.0.113.7"),
    ("10.0.0.5", ["10.0.0.6", "10.0.0.7"], "10.0.0.6"),  # every hop a proxy: the farthest one seen
    (None, ["203.0.113.7"], None),
])
def test_the_client_is_the_first_untrusted_hop_from_the_right(peer: str | None, hops: list[str],
                                                               client: str | None) -> None:
    assert client_address(peer, hops, PROXY) == client


def test_both_headers_are_read_x_forwarded_for_first() -> None:
    assert forwarded_hops([("X-Forwarded-For", "1.1.1.1, 2.2.2.2"), ("X-Forwarded-For", "3.3.3.3")]) == [
        "1.1.1.1", "2.2.2.2", "3.3.3.3"]
    assert forwarded_hops({"Forwarded": 'for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"'}) == [
        "192.0.2.60", '"[2001:db8:cafe::17]:4711"']
    assert client_address("10.0.0.1", forwarded_hops({"Forwarded": 'for="[2001:db8:cafe::17]:4711"'}),
                          PROXY) == "2001:db8:cafe::17"


@given(st.lists(st.ip_addresses().map(str), max_size=6), st.ip_addresses())
def test_an_untrusted_peer_is_always_the_client(hops: list[str], peer: ipaddress.IPv4Address
                                                | ipaddress.IPv6Address) -> None:
    trusted = any(peer.version == n.version and peer in n for n in PROXY)
    if not trusted:
        assert client_address(str(peer), hops, PROXY) == str(peer)


def test_the_setting_is_checked_at_start_naming_the_variable() -> None:
    s = load_settings({"BRIDGE_TRUSTED_PROXIES": "10.0.0.0/8,192.168.1.1"})
    assert [str(n) for n in s.proxy_networks] == ["10.0.0.0/8", "192.168.1.1/32"]
    assert load_settings({}).proxy_networks == ()
    with pytest.raises(ConfigError, match="BRIDGE_TRUSTED_PROXIES: 'nginx'"):
        load_settings({"BRIDGE_TRUSTED_PROXIES": "10.0.0.1,nginx"})


async def test_handlers_see_the_client_only_behind_a_trusted_proxy() -> None:
    async def who(request: web.Request) -> web.Response:
        return web.json_response({"remote": request.remote})

    for trusted, expected in ((parse_trusted("127.0.0.1"), "203.0.113.7"), ((), "127.0.0.1"),
                              (parse_trusted("10.0.0.0/8"), "127.0.0.1")):
        app = web.Application()
        app.router.add_get("/v1/who", who)
        protect(app, trusted_proxies=trusted)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            r = await http.get("/v1/who", headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.7"})
            assert (await r.json())["remote"] == expected, trusted
