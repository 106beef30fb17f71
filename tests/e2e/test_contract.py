"""The HTTP API against its own OpenAPI document, property-based: Schemathesis (pinned in the dev extras)
generates requests from the `/v1/openapi.json` a real bridge process serves — valid ones and invalid ones,
for every operation — and checks every answer against the document: no server error, a documented status,
the documented content type, headers and body schema; invalid requests refused, valid ones not refused for
reasons the document does not state, undocumented methods answered 405 (docs/errors.md). The bridge runs
on a real PostgreSQL and the real `opencode serve` 1.18.33 with the mock model, holding a session with a
finished turn, so the reads of that session answer with real bodies."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema_rs
import pytest

from bridge.auth import mint_token
from tests.support.bridge_proc import BridgeFactory
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e-contract"
SECRET = "e2e-contract-secret-" + "c" * 40
ORIGIN = "https://chat.example.com"
# Examples per operation and phase: enough to reach every documented constraint, bounded so the whole test
# stays well under two minutes on the 2-core CI machine (CONTRACT_EXAMPLES to explore further by hand).
MAX_EXAMPLES = int(os.environ.get("CONTRACT_EXAMPLES", "10"))
CHECKS = ",".join([
    "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_headers_conformance",
    "response_schema_conformance", "negative_data_rejection", "positive_data_acceptance",
    "missing_required_header", "unsupported_method", "allow_header_conformance", "ignored_auth",
])
CONFIG = Path(__file__).with_name("schemathesis.toml")


async def _seed(url: str, serve: OpencodeServe, token: str) -> str:
    """A session with one finished turn, through the bridge."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.post(f"{url}/v1/sessions", json={"command_id": "seed", "directory": str(serve.project_dir)}
                             ) as r:
            assert r.status == 201, await r.text()
            sid = str((await r.json())["session_id"])
        async with http.post(f"{url}/v1/sessions/{sid}/prompt",
                             json={"command_id": "seed-p", "text": "hello", "delivery": "steer"}) as r:
            assert r.status == 200, await r.text()

        async def finished() -> bool:
            async with http.get(f"{url}/v1/sessions/{sid}/transcript") as t:
                entries = (await t.json())["data"]["entries"]
                return any(e["type"] == "assistant" and e.get("complete") for e in entries)

        await wait_until(finished, 60, 0.2, message="the seeded turn finished")
    return sid


def _response_problems(spec: dict[str, Any], path: str, status: int, body: object) -> list[str]:
    """`body` against the document's schema of `path`'s GET answer `status` (JSON Schema 2020-12)."""
    answer = spec["paths"][path]["get"]["responses"][str(status)]
    schema = answer["content"]["application/json"]["schema"]
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "components": spec["components"]}
    return [f"{'/'.join(map(str, e.instance_path)) or '$'}: {e.message}"
            for e in jsonschema_rs.validator_for(root).iter_errors(body)]


async def _real_bodies_conform(url: str, token: str, sid: str) -> None:
    """Every read of the seeded session (Schemathesis never guesses its id) answers 200 with a body in the
    document, so the bodies checked include real transcripts, events, commands and state."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.get(f"{url}/v1/openapi.json") as r:
            spec = await r.json()
        reads = [p for p, ops in spec["paths"].items() if "get" in ops and "{request_id}" not in p]
        assert len(reads) >= 10, reads
        for path in reads:
            query = {"session": sid} if path == "/v1/commands" else {}
            async with http.get(url + path.replace("{session_id}", sid), params=query) as r:
                body = await r.json()
                assert r.status == 200, (path, body)
                assert _response_problems(spec, path, r.status, body) == [], (path, body)
                if path.endswith("/transcript"):
                    assert len(body["data"]["entries"]) >= 2, body  # the prompt and the answer
                if path.endswith("/events"):
                    assert len(body["data"]) >= 5, body


async def _schemathesis(url: str, token: str, *extra: str) -> tuple[int, str]:
    st = Path(sys.executable).with_name("st")
    proc = await asyncio.create_subprocess_exec(
        str(st), "--config-file", str(CONFIG), "run", f"{url}/v1/openapi.json", "--checks", CHECKS,
        "--max-examples", str(MAX_EXAMPLES), "--seed", "29", "--workers", "1", "--phases", "examples,coverage,fuzzing",
        "--header", f"Authorization: Bearer {token}", "--header", f"Origin: {ORIGIN}", "--request-timeout", "30",
        "--suppress-health-check", "all", "--output-truncate", "false", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
    out, _ = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


async def test_every_answer_of_the_http_api_is_in_its_openapi_document(
    bridge_processes: BridgeFactory, opencode: OpencodeServe
) -> None:
    bridge = bridge_processes("contract", BRIDGE_AUTH_SECRET=SECRET, BRIDGE_ALLOWED_ORIGINS=ORIGIN,
                              BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir), BRIDGE_PROMPT_RUNTIME="v2")
    bridge.start()
    await bridge.wait_ready(60)
    token = mint_token(SECRET, UPSTREAM, None, 3600, "contract", scope="control", approve="once")
    sid = await _seed(bridge.url, opencode, token)
    await _real_bodies_conform(bridge.url, token, sid)
    rc, out = await _schemathesis(bridge.url, token)
    print(out)
    assert rc == 0, out[-20000:]
