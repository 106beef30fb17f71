"""`make demo` (bench/demo.py) on its own: embedded PostgreSQL, the real opencode serve 1.18.33 with the
scripted mock model, the bridge, a scripted conversation; the test checks what the bridge mirrored with its
own eyes (audit API and the database), then sends Ctrl-C and checks that every process the demo started
is gone."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text

from bridge.auth import verify_token
from bridge.store.db import make_engine
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


class DemoProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self.other: list[str] = []  # what is not a progress line (a traceback), for the failure message

    async def until(self, event: str, timeout: float) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            assert self.proc.stdout is not None
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    raise AssertionError(f"demo exited before {event}: {self.lines}\n" + "\n".join(self.other[-40:]))
                line = raw.decode().strip()
                if not line.startswith("{"):
                    self.other.append(line)
                    continue
                self.lines.append(json.loads(line))
                if self.lines[-1]["event"] == event:
                    return self.lines[-1]

        return await asyncio.wait_for(read(), timeout)


async def _start(opencode_bin: Path, workdir: Path, *extra: str) -> DemoProcess:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.demo", "--json", "--port", "0", "--workdir", str(workdir), *extra,
        cwd=REPO, env={**os.environ, "OPENCODE_BIN": str(opencode_bin)},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True)  # a process group of its own, like a shell's foreground job
    return DemoProcess(proc)


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for its reaper counts: PostgreSQL's postmaster is no child of ours)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def _read_lines(path: str) -> list[str]:
    return Path(path).read_text().splitlines()


async def _all_gone(pids: dict[str, int]) -> None:
    await wait_until(lambda: all(_gone(pid) for pid in pids.values()), 15, 0.05,
                     message=f"processes the demo started still run: {pids}")


async def test_the_demo_mirrors_its_conversation_and_ctrl_c_stops_everything_it_started(
    opencode_bin: Path, tmp_path: Path
) -> None:
    demo = await _start(opencode_bin, tmp_path / "demo")
    try:
        ready = await demo.until("demo_ready", 120)
        done = await demo.until("demo_script_done", 180)
        sid = done["session"]
        assert done["turns"] == ["text, streamed", "reasoning and text", "tool calls", "permission request"]

        # Through the bridge: the session list and the transcript the viewer reads.
        headers = {"Authorization": f"Bearer {ready['token']}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.get(f"{ready['bridge_url']}/v1/sessions") as r:
                sessions = (await r.json())["data"]
            async with http.get(f"{ready['bridge_url']}/v1/sessions/{sid}/transcript") as r:
                entries = (await r.json())["data"]["entries"]
            async with http.get(ready["viewer_url"]) as r:
                assert r.status == 200 and "/static/boot.js" in await r.text()  # the viewer, on the package
        assert [s["session_id"] for s in sessions] == [sid]
        assert sum(e["type"] == "user" for e in entries) == 4
        tools = [p for e in entries if e["type"] == "assistant" for p in e["parts"] if p["type"] == "tool"]
        assert [(t["tool"], t["status"]) for t in tools][:2] == [("bash", "success"), ("read", "success")]
        assert "hi" in tools[0]["output_text"]

        # In the database: the events, and the permission request still pending.
        engine = make_engine(ready["database_url"])
        try:
            async with engine.connect() as conn:
                stored = (await conn.execute(text(
                    "SELECT count(*) FROM chat_session_events WHERE session_id = :s"), {"s": sid})).scalar_one()
                pending = (await conn.execute(text(
                    "SELECT request_id FROM chat_permission_requests WHERE session_id = :s AND reply IS NULL"),
                    {"s": sid})).scalars().all()
        finally:
            await engine.dispose()
        assert stored == sessions[0]["event_count"] > 20
        assert pending == [done["permission"]]

        os.killpg(demo.proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: to the whole foreground group
        await demo.until("demo_stopped", 60)
        assert await asyncio.wait_for(demo.proc.wait(), 30) == 0
    finally:
        if demo.proc.returncode is None:
            demo.proc.kill()
            await demo.proc.wait()
    pids = ready["pids"]
    assert pids["postgres"]
    await _all_gone(pids)
    # The bridge was stopped by the demo (one SIGTERM, a graceful stop), not by the Ctrl-C itself.
    bridge_log = [json.loads(line) for line in _read_lines(ready["logs"]["bridge"]) if line.startswith("{")]
    assert [e["event"] for e in bridge_log if e["event"] in ("bridge_stopping", "bridge_stopped")] == [
        "bridge_stopping", "bridge_stopped"]
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.get(f"{ready['bridge_url']}/livez")


async def test_demo_once_runs_the_script_checks_the_mirror_and_exits(opencode_bin: Path, tmp_path: Path) -> None:
    dev_server = "http://localhost:5173"
    demo = await _start(opencode_bin, tmp_path / "demo", "--once", "--origin", dev_server)
    try:
        ready = await demo.until("demo_ready", 120)
        # A product's local test target: a control token that may "Allow once", the developer's origin let in
        # (CORS), and a command that mints more tokens the bridge accepts.
        claims = verify_token(ready["token"], ready["secret"], ready["upstream"])
        assert (claims.scope, claims.approve, claims.sessions) == ("control", "once", None)
        assert ready["allowed_origins"] == [dev_server]
        async with aiohttp.ClientSession() as http, http.options(
                f"{ready['bridge_url']}/v1/sessions", headers={
                    "Origin": dev_server, "Access-Control-Request-Method": "POST"}) as r:
            assert (r.status, r.headers["Access-Control-Allow-Origin"]) == (204, dev_server)
        env, _, cmd = ready["mint_command"].partition(" .venv/bin/opencode-bridge ")
        minted = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", *cmd.split(), cwd=REPO, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, **dict(kv.split("=", 1) for kv in env.split()), "BRIDGE_STATE_DIR": str(tmp_path)})
        out, _ = await minted.communicate()
        assert verify_token(out.decode().strip(), ready["secret"], ready["upstream"]).scope == "prompt"
        done = await demo.until("demo_script_done", 120)
        assert done["mirrored"] == {"prompts": 3, "tool_calls": 3, "tools_succeeded": 2}
        assert await asyncio.wait_for(demo.proc.wait(), 60) == 0
    finally:
        if demo.proc.returncode is None:
            demo.proc.kill()
            await demo.proc.wait()
    await _all_gone(ready["pids"])
