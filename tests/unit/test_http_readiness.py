"""`coalesced`: a probe storm costs the dependencies one check per max_age, never one per probe."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bridge.http.app import coalesced


class Check:
    def __init__(self) -> None:
        self.calls = 0
        self.gate = asyncio.Event()
        self.fail = False

    async def __call__(self) -> dict[str, Any]:
        self.calls += 1
        await self.gate.wait()
        if self.fail:
            raise ConnectionError("database away")
        return {"database": {"ok": True, "run": self.calls}}


async def test_concurrent_probes_share_one_run_and_later_ones_reuse_it_until_it_is_old() -> None:
    now = [100.0]
    check = Check()
    shared = coalesced(check, 1.0, clock=lambda: now[0])
    probes = [asyncio.ensure_future(shared()) for _ in range(50)]
    await asyncio.sleep(0)
    check.gate.set()
    results = await asyncio.gather(*probes)
    assert check.calls == 1 and all(r == {"database": {"ok": True, "run": 1}} for r in results)

    now[0] += 0.9
    assert (await shared())["database"]["run"] == 1 and check.calls == 1
    now[0] += 0.2
    assert (await shared())["database"]["run"] == 2 and check.calls == 2


async def test_a_failed_run_is_not_kept() -> None:
    check = Check()
    check.gate.set()
    check.fail = True
    shared = coalesced(check, 60.0, clock=lambda: 0.0)
    with pytest.raises(ConnectionError):
        await shared()
    check.fail = False
    assert (await shared())["database"]["ok"] and check.calls == 2


async def test_a_cancelled_probe_does_not_cancel_the_run_others_wait_for() -> None:
    check = Check()
    shared = coalesced(check, 1.0, clock=lambda: 0.0)
    first = asyncio.ensure_future(shared())
    second = asyncio.ensure_future(shared())
    await asyncio.sleep(0)
    first.cancel()  # a client hung up mid-probe
    check.gate.set()
    assert (await second)["database"]["ok"] and check.calls == 1


async def test_every_metrics_scrape_exports_readiness_as_bridge_ready() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from bridge.http.app import build_app

    state: dict[str, Any] = {"database": {"ok": True}}

    async def readiness() -> dict[str, Any]:
        return dict(state)

    # detail=…: this client is trusted with error texts (without it they are redacted, docs/operations.md)
    async with TestClient(TestServer(build_app(readiness, detail=lambda _request: True))) as http:
        assert "\nbridge_ready 1.0\n" in await (await http.get("/metrics")).text()
        state["database"] = {"ok": False, "error": "refused"}
        assert "\nbridge_ready 0.0\n" in await (await http.get("/metrics")).text()
        resp = await http.get("/readyz")
        assert resp.status == 503 and (await resp.json())["checks"]["database"]["error"] == "refused"
