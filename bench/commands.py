"""Added latency of a prompt through the bridge (`POST /v1/sessions/{id}/prompt`) versus straight to the
serve (`POST /api/session/{id}/prompt`), measured in the same run, interleaved, on one idle session.

Starts an embedded PostgreSQL, the mock provider, the project-local `opencode serve` 1.18.33 and the bridge
(`python -m bridge run`), all on 127.0.0.1 under a throw-away directory. Each prompt is timed from sending the
request to its answer (the admission); the session is left to go idle before the next one.

    .venv/bin/python -m bench.commands --prompts 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from bridge.auth import mint_token
from bridge.store.embedded import start_embedded
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = "bench-commands"
SECRET = "bench-commands-" + "s" * 40


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def _measure(serve: OpencodeServe, bridge: BridgeProcess, prompts: int) -> tuple[list[float], list[float]]:
    tok = mint_token(SECRET, UPSTREAM, None, 3600, "bench", scope="control")
    headers = {"Authorization": f"Bearer {tok}"}
    direct: list[float] = []
    through: list[float] = []
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{bridge.url}/v1/sessions", headers=headers,
                             json={"command_id": "bench-create", "directory": str(serve.project_dir)}) as r:
            sid = (await r.json())["session_id"]
        await serve.prompt(sid, "warm-up: boots the location", "queue")  # the first prompt takes ~2 s
        await serve.wait_idle(sid, 60)
        for i in range(prompts):
            t0 = time.perf_counter()
            await serve.prompt(sid, f"direct {i}", "queue")
            direct.append(time.perf_counter() - t0)
            await serve.wait_idle(sid, 60)
            t0 = time.perf_counter()
            async with http.post(f"{bridge.url}/v1/sessions/{sid}/prompt", headers=headers,
                                 json={"command_id": f"bench-{i}", "text": f"bridge {i}", "delivery": "queue"}) as r:
                await r.read()
                assert r.status == 200, r.status
            through.append(time.perf_counter() - t0)
            await serve.wait_idle(sid, 60)
    return direct, through


async def main(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bridge-bench-commands-"))
    pg = start_embedded(workdir / "pg")
    mock = MockLLM()
    await mock.start()
    serve = OpencodeServe(args.opencode, workdir / "opencode", mock.base_url)
    bridge: BridgeProcess | None = None
    try:
        await serve.start()
        bridge = BridgeProcess(workdir, serve.base_url, pg.url,
                               extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_SECRET": SECRET,
                                          "BRIDGE_ALLOWED_DIRECTORIES": str(serve.project_dir),
                                          "BRIDGE_PROMPT_RUNTIME": "v2"})  # compared with the v2 route
        bridge.start()
        await bridge.wait_ready(60)
        direct, through = await _measure(serve, bridge, args.prompts)
    finally:
        if bridge is not None:
            bridge.stop()
        await serve.close()
        await mock.stop()
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    ms = 1000.0
    print(f"prompts: {len(direct)} direct, {len(through)} through the bridge (interleaved, same session)")
    for name, xs in (("direct  ", direct), ("bridge  ", through)):
        print(f"{name} p50 {statistics.median(xs) * ms:7.1f} ms   p95 {_pct(xs, 0.95) * ms:7.1f} ms   "
              f"max {max(xs) * ms:7.1f} ms")
    print(f"added   p50 {(statistics.median(through) - statistics.median(direct)) * ms:7.1f} ms")
    return 0


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--opencode", default=os.environ.get(
        "OPENCODE_BIN", str(REPO / ".opencode" / "node_modules" / ".bin" / "opencode")))
    return ap.parse_args()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse_args())))
