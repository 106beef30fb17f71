"""The transcript of a real tool-using turn (real opencode serve, MOCK:tool), built by the running
bridge's API and replayed later by the CLI from the database alone: both equal the expected conversation."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from tests.e2e.test_mirror import UPSTREAM, wait_mirrored
from tests.support.bridge_proc import running_bridge
from tests.support.mock_llm import FINAL_TEXT
from tests.support.opencode import OpencodeServe

pytestmark = pytest.mark.e2e

SECRET = "e2e-audit-secret-" + "x" * 32
REPO = Path(__file__).resolve().parents[2]




def conversation(entries: list[dict[str, Any]]) -> list[Any]:
    """What a reader sees: who said what, which tools ran with which input, and what came back."""
    out: list[Any] = []
    for e in entries:
        if e["type"] == "user":
            out.append(("user", e["text"], e["delivery"], e["started_seq"] is not None))
            continue
        parts = []
        for p in e["parts"]:
            if p["type"] == "tool":
                parts.append(("tool", p["tool"], p["input"], p["status"], (p["output_text"] or "")[:40],
                              p["error"]))
            else:
                parts.append((p["type"], p["text"]))
        out.append(("assistant", e["finish"], e["complete"], e["tokens"]["output"] if e["tokens"] else None,
                    tuple(parts)))
    return out


def cli(database_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    env.update(BRIDGE_DATABASE_URL=database_url, BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_LOG_LEVEL="warning")
    return subprocess.run([sys.executable, "-m", "bridge", *argv], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)


async def test_transcript_of_a_real_tool_turn_is_the_expected_conversation_live_and_replayed(
    tmp_path: Path, opencode: OpencodeServe, database_url: str, db: AsyncEngine
) -> None:
    async with running_bridge(tmp_path, opencode.base_url, database_url, ready_s=30.0,
                              BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET) as bridge:
        sid = await opencode.create_session()
        await opencode.prompt(sid, "MOCK:tool Run echo")
        await opencode.wait_idle(sid, 60)
        await wait_mirrored(db, opencode, sid)
        token = mint_token(SECRET, UPSTREAM, [sid], 600)
        async with aiohttp.ClientSession() as http, http.get(
            f"{bridge.url}/v1/sessions/{sid}/transcript", headers={"Authorization": f"Bearer {token}"}
        ) as r:
            assert r.status == 200
            live = (await r.json())["data"]["entries"]

    tokens = 10  # the mock reports 100 in / 10 out per call
    echo = {"command": "echo hi", "description": "Print hi"}
    assert conversation(live) == [
        ("user", "MOCK:tool Run echo", "steer", True),
        ("assistant", "tool-calls", True, tokens,
         (("tool", "bash", echo, "success", "hi\nCommand exited with code 0.", None),)),
        ("assistant", "tool-calls", True, tokens,
         (("tool", "read", {"path": "hello.txt"}, "success", "hello from project\n", None),)),
        ("assistant", "stop", True, tokens, (("text", FINAL_TEXT),)),
    ]

    # Replayed later, by another process, from the database alone.
    done = await asyncio.to_thread(cli, database_url, "transcript", sid, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entries"] == live
    text = (await asyncio.to_thread(cli, database_url, "transcript", sid)).stdout
    assert "tool bash [success]" in text and FINAL_TEXT in text
