"""Against a real OpenCode 2.x serve (`OPENCODE2_BIN=/path/to/opencode`, a 2.x build): what the 2.x driver
and the recognition were written from (docs/upstream.md "OpenCode 2.x") checked on the wire. No 2.x build is
installable from the registries reachable here, so without `OPENCODE2_BIN` these tests skip, saying so —
the one skip the project allows, also under CI=true. They need no model: sessions, the log, hints and a
rename are enough."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text

from bridge.store.db import make_engine
from bridge.upstream.driver import FROM_START, SWEEP
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.recognize import recognize
from tests.support.bridge_proc import BridgeProcess
from tests.support.waiting import wait_until

BIN = os.environ.get("OPENCODE2_BIN", "")
PASSWORD = "e2e-gen2-password"

pytestmark = pytest.mark.skipif(
    not BIN, reason="needs an OpenCode 2.x build (OPENCODE2_BIN=…): none is in the package registries reachable "
                    "here (docs/upstream.md §24)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture
async def serve2(tmp_path: Path) -> AsyncIterator[str]:
    """`opencode serve` of the 2.x build on a free loopback port, fresh HOME, a throw-away git project."""
    project = tmp_path / "project"
    project.mkdir()
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(project)], check=True)
    port = _free_port()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "OPENCODE_SERVER_PASSWORD": PASSWORD}
    log = (tmp_path / "serve2.log").open("wb")
    proc = subprocess.Popen([BIN, "serve", "--hostname", "127.0.0.1", "--port", str(port)],  # noqa: ASYNC220
                            cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        async def up() -> bool:
            async with UpstreamHttp(url, "opencode", PASSWORD) as http:
                return (await recognize(http, 1.0)).generation is not None

        await wait_until(up, 60, 0.2, message="opencode 2.x serve answering")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def test_it_is_recognised_as_2x_from_api_info(serve2: str) -> None:
    async with UpstreamHttp(serve2, "opencode", PASSWORD) as http:
        rec = await recognize(http)
    assert rec.generation == 2 and rec.route == "/api/info", rec


async def test_sessions_log_and_hints_are_as_the_driver_reads_them(serve2: str, tmp_path: Path) -> None:
    async with UpstreamHttp(serve2, "opencode", PASSWORD) as http:
        driver = Gen2Driver(http)
        async with driver.changes() as changes:
            first = await asyncio.wait_for(anext(aiter(changes)), 10)
            assert first == SWEEP
            _, created = await http.send_json("POST", "/api/session", {"location": {"directory": str(tmp_path)}})
            sid = created["data"]["id"]
            assert sid in {s.id for s in await driver.list_sessions()}
            await http.send_json("PATCH", http.session_path(sid), {"title": "renamed by the e2e test"})
            async with driver.follow(sid, FROM_START) as reads:
                types: list[str] = []
                async with asyncio.timeout(10):
                    async for read in reads:
                        assert not read.bad, read.bad
                        types += [e.type for e in read.envelopes]
                        if "session.renamed" in types:
                            break
            assert types[0] == "session.created"
            hint = await asyncio.wait_for(anext(aiter(changes)), 10)
            assert hint.kind in ("hint", "sweep")


async def test_the_bridge_with_the_2x_driver_off_says_what_it_found(serve2: str, tmp_path: Path) -> None:
    bridge = BridgeProcess(tmp_path, serve2, "postgresql://nobody:x@127.0.0.1:1/none",
                           extra_env={"BRIDGE_UPSTREAM_PASSWORD": PASSWORD, "BRIDGE_UPSTREAM_GENERATION": "1"})
    bridge.start()
    rc = await asyncio.to_thread(bridge.wait, 60)
    text = bridge.log_path.read_text()
    assert rc == 2 and "is OpenCode 2." in text and "(GET /api/info), but BRIDGE_UPSTREAM_GENERATION=1" in text, \
        text[-2000:]


async def test_the_bridge_mirrors_it(serve2: str, tmp_path: Path, database_url: str) -> None:
    async with UpstreamHttp(serve2, "opencode", PASSWORD) as http:
        _, created = await http.send_json("POST", "/api/session", {"location": {"directory": str(tmp_path)}})
        sid = created["data"]["id"]
        await http.send_json("PATCH", http.session_path(sid), {"title": "mirrored by the e2e test"})
        async with Gen2Driver(http).follow(sid, FROM_START) as reads:
            want: list[tuple[int, str]] = []
            async with asyncio.timeout(10):
                async for read in reads:
                    want += [(e.seq, e.id) for e in read.envelopes if e.seq is not None]
                    if any(t == "session.renamed" for t in (e.type for e in read.envelopes)):
                        break
    bridge = BridgeProcess(tmp_path, serve2, database_url, extra_env={"BRIDGE_UPSTREAM_PASSWORD": PASSWORD})
    bridge.start()
    engine = make_engine(database_url, pool_size=1, max_overflow=0)
    try:
        await bridge.wait_ready()

        async def stored() -> bool:
            async with engine.connect() as conn:
                rows = (await conn.execute(text("select seq, event_id from chat_session_events "
                                                "where session_id = :s order by seq"), {"s": sid})).all()
            return [tuple(r) for r in rows][:len(want)] == want

        await wait_until(stored, 30, 0.2, message="the 2.x session mirrored")
    finally:
        bridge.stop()
        await engine.dispose()
