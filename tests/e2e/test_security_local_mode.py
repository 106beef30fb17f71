"""BRIDGE_AUTH_DISABLED=true on a real bridge process (docs/security.md, "Local development"): it prints a
token for this run on the console, and nothing passes without it — no more "no auth at all"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.bridge_proc import BridgeProcess
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e-local-mode"


@pytest.fixture
def bridges() -> Iterator[list[BridgeProcess]]:
    made: list[BridgeProcess] = []
    yield made
    for b in made:
        b.stop()
        print(f"\n--- tail of {b.log_path} ---\n{b.log_tail(20)}")


async def test_auth_disabled_prints_a_token_for_this_run_and_refuses_everyone_else(
    tmp_path: Path, fake: FakeUpstream, database_url: str, bridges: list[BridgeProcess]
) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, database_url,
                           extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_DISABLED": "true"})
    bridges.append(bridge)
    bridge.start()
    await bridge.wait_ready()
    printed = await wait_until(
        lambda: re.search(rf"http://127\.0\.0\.1:{bridge.port}/\?token=([\w.-]+)", bridge.log_path.read_text()),
        10, 0.05, message="the token printed")
    token = printed.group(1)
    assert not (tmp_path / "bridge-state" / "auth_secret").exists()  # a secret of this run only
    body = {"command_id": "local", "text": "hi", "delivery": "queue"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.url}/v1/sessions") as r:
            assert r.status == 401  # no token: refused, as in every mode
        async with http.get(f"{bridge.url}/v1/sessions", headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 200
        async with http.post(f"{bridge.url}/v1/sessions/ses_x/prompt", json=body) as r:
            assert r.status == 401
        # A page on another site cannot post, even holding the token.
        cross_site = {"Authorization": f"Bearer {token}", "Origin": "https://evil.example",
                      "Content-Type": "text/plain"}
        async with http.post(f"{bridge.url}/v1/sessions/ses_x/prompt", data=b"{}", headers=cross_site) as r:
            assert r.status == 403
    json_logs = [line for line in bridge.log_path.read_text().splitlines() if line.startswith("{")]
    assert json_logs and not any(token in line for line in json_logs)  # printed, never logged
