"""The TypeScript package from a Node backend (clients/typescript/test/node/backend.mjs) against the real
bridge, the real opencode serve 1.18.33 and the mock model: it mints a `control` token with
`@opencode-bridge/client/server`, creates a session and prompts it with `BridgeClient` (generated from the
bridge's OpenAPI document), and reads the transcript until the turn is done."""

from __future__ import annotations

import aiohttp
import pytest

from bridge.auth import mint_token
from tests.support.bridge_proc import BridgeFactory
from tests.support.mock_llm import HELLO_CHUNKS
from tests.support.opencode import OpencodeServe
from tests.support.tsclient import PACKAGE, run_node_async

pytestmark = pytest.mark.e2e

UPSTREAM = "tsclient-node"
SECRET = "tsclient-node-" + "n" * 40


async def test_a_node_backend_mints_creates_prompts_and_reads_the_transcript(
    opencode: OpencodeServe, bridge_processes: BridgeFactory
) -> None:
    bridge = bridge_processes(BRIDGE_AUTH_SECRET=SECRET, BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir),
                              BRIDGE_PROMPT_RUNTIME="v2")
    bridge.start()
    await bridge.wait_ready(60)
    out = await run_node_async(PACKAGE / "test" / "node" / "backend.mjs", env={
        "BRIDGE_URL": bridge.url, "BRIDGE_SECRET": SECRET, "BRIDGE_UPSTREAM": UPSTREAM,
        "PROJECT_DIR": str(opencode.project_dir)})
    sid = out["session"]
    assert out["prompt"]["command_id"] == "node-prompt-1"
    user = [e for e in out["entries"] if e["type"] == "user"]
    assert [(u["text"], u.get("asked_by")) for u in user] == [("MOCK:text from node", "backend")]
    texts = [p["text"] for e in out["entries"] if e["type"] == "assistant" for p in e["parts"] if p["type"] == "text"]
    assert texts == ["".join(HELLO_CHUNKS)]
    token = mint_token(SECRET, UPSTREAM, None, 60, "check", scope="read")
    async with aiohttp.ClientSession() as http, http.get(
            f"{bridge.url}/v1/sessions/{sid}/transcript", headers={"Authorization": f"Bearer {token}"}) as r:
        assert r.status == 200
        assert (await r.json())["data"]["entries"] == out["entries"]
