"""The serve's OpenCode generation, recognised by the real daemon (`python -m bridge run`): a 2.x serve (the
fake built from 2.x's source, tests/support/fake_gen2.py) stops start-up with one line naming the version
and what to do — before the database is touched — also when it only appears after start-up; a 1.x serve
runs the 1.x driver and says so in /readyz."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from tests.support.bridge_proc import BridgeProcess, free_port
from tests.support.fake_gen2 import FakeGen2Serve
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until

# Nothing listens there: a start-up that touched the database would fail on it, not refuse the serve.
NO_DATABASE = "postgresql://nobody:x@127.0.0.1:1/none"


@pytest_asyncio.fixture
async def gen2() -> AsyncIterator[FakeGen2Serve]:
    serve = FakeGen2Serve()
    await serve.start()
    yield serve
    await serve.stop()


def _exit(bridge: BridgeProcess) -> tuple[int, list[str]]:
    rc = bridge.wait(30)
    return rc, bridge.log_path.read_text(errors="replace").splitlines()


def _one_line(lines: list[str], needle: str) -> str:
    hits = [line for line in lines if needle in line and not line.startswith("{")]
    assert len(hits) == 1, "\n".join(lines[-30:])
    assert not any("Traceback" in line or "bridge_crashed" in line for line in lines), "\n".join(lines[-30:])
    return hits[0]


async def test_a_2x_serve_stops_start_up_with_one_line_before_the_database(tmp_path: Path,
                                                                          gen2: FakeGen2Serve) -> None:
    bridge = BridgeProcess(tmp_path, gen2.url, NO_DATABASE, extra_env={"BRIDGE_UPSTREAM_PASSWORD": "pw"})
    bridge.start()
    rc, lines = await asyncio.to_thread(_exit, bridge)
    assert rc == 2
    line = _one_line(lines, "OpenCode 2.0.17")
    assert line == (f"opencode-bridge: configuration error: the upstream at {gen2.url} is OpenCode 2.0.17 "
                    "(GET /api/info); this bridge has no OpenCode 2.x driver yet (docs/upstream.md, \"OpenCode 2.x\"): "
                    "point BRIDGE_UPSTREAM_URL at an opencode serve 1.x (verified: 1.18.33)")
    # Only the recognition routes were asked (authenticated), nothing of the 1.x driver's.
    assert set(gen2.request_paths) == {"/api/info", "/global/health", "/api/health"}


async def test_generation_1_forced_on_a_2x_serve_says_which_setting_to_change(tmp_path: Path,
                                                                             gen2: FakeGen2Serve) -> None:
    bridge = BridgeProcess(tmp_path, gen2.url, NO_DATABASE,
                           extra_env={"BRIDGE_UPSTREAM_PASSWORD": "pw", "BRIDGE_UPSTREAM_GENERATION": "1"})
    bridge.start()
    rc, lines = await asyncio.to_thread(_exit, bridge)
    assert rc == 2
    assert "but BRIDGE_UPSTREAM_GENERATION=1: set it to auto (or 2)" in _one_line(lines, "OpenCode 2.0.17")


async def test_a_2x_serve_that_appears_after_start_up_stops_the_running_bridge(tmp_path: Path,
                                                                              database_url: str) -> None:
    port = free_port()
    bridge = BridgeProcess(tmp_path, f"http://127.0.0.1:{port}", database_url,
                           extra_env={"BRIDGE_UPSTREAM_PASSWORD": "pw"})
    bridge.start()
    serve = FakeGen2Serve(port=port)
    try:
        async def readyz_answers() -> bool:  # up, not ready (no upstream), the guard asking again
            async with aiohttp.ClientSession() as http, http.get(bridge.url + "/readyz") as r:
                return r.status == 503

        await wait_until(readyz_answers, 30, 0.1, message="bridge /readyz", ignore=(aiohttp.ClientError,))
        await serve.start()
        rc, lines = await asyncio.to_thread(_exit, bridge)
        assert rc == 2
        line = _one_line(lines, "OpenCode 2.0.17")
        assert line.startswith(f"opencode-bridge: configuration error: the upstream at {serve.url} is OpenCode 2.0.17")
        assert any('"event": "upstream_refused"' in raw for raw in lines)
    finally:
        bridge.stop()
        await serve.stop()


async def test_a_1x_serve_runs_the_1x_driver_and_readyz_says_so(tmp_path: Path, database_url: str,
                                                                fake: FakeUpstream) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, database_url)
    bridge.start()
    try:
        await bridge.wait_ready()
        async with aiohttp.ClientSession() as http, http.get(bridge.url + "/readyz?verbose") as r:
            body = await r.json()
        assert r.status == 200
        assert body["checks"]["upstream_generation"] == {"ok": True, "driver": 1, "generation": 1,
                                                         "version": "1.18.33"}
        log = bridge.log_path.read_text()
        assert '"recognised": "OpenCode 1.18.33 (1.x, from GET /api/health)"' in log
    finally:
        bridge.stop()


@pytest.mark.parametrize("setting", ["2"])
async def test_generation_2_forced_on_a_1x_serve_refuses(tmp_path: Path, fake: FakeUpstream, setting: str) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, NO_DATABASE, extra_env={"BRIDGE_UPSTREAM_GENERATION": setting})
    bridge.start()
    rc, lines = await asyncio.to_thread(_exit, bridge)
    assert rc == 2
    assert "but BRIDGE_UPSTREAM_GENERATION=2: set it to auto (or 1)" in _one_line(lines, "OpenCode 1.18.33")
