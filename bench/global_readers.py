"""What each `/global/event` reader costs the real `opencode serve` 1.18.33 (docs/operations.md "Workers": the
parent reads it once per host, instead of once per worker).

`python -m bench.global_readers [--turns 8] [--chunks 300] [--readers 1,2,4] [--rounds 2]` starts the serve on the
project's scripted mock model, then for each reader count (alternated, `--rounds` times) holds that many
`GET /global/event` connections open (each drains every byte, as a bridge would read them) while `--turns`
prompts stream `--chunks` text deltas each, one turn after the other; it reports the serve's CPU (user +
system, /proc) per turn and per event sent, and the bytes each reader got. The difference between reader
counts is what one more reader costs the serve.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.in_database import machine
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its children so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + sum(_cpu_s(int(c)) for c in children)


class Reader:
    def __init__(self) -> None:
        self.bytes = 0
        self.events = 0

    async def run(self, http: aiohttp.ClientSession, url: str, connected: asyncio.Event) -> None:
        async with http.get(url + "/global/event", timeout=aiohttp.ClientTimeout(total=None)) as r:
            connected.set()
            async for chunk in r.content.iter_any():
                self.bytes += len(chunk)
                self.events += chunk.count(b"\n\n")


async def phase(serve: OpencodeServe, readers: int, turns: int, chunks: int) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        got = [Reader() for _ in range(readers)]
        ready = [asyncio.Event() for _ in range(readers)]
        tasks = [asyncio.create_task(r.run(http, serve.base_url, e)) for r, e in zip(got, ready, strict=True)]
        await asyncio.gather(*(e.wait() for e in ready))
        sids = [await serve.create_session() for _ in range(turns)]
        assert serve.pid is not None
        cpu0, t0, events0 = _cpu_s(serve.pid), time.perf_counter(), got[0].events
        for sid in sids:
            await serve.prompt(sid, f"MOCK:slow:{chunks}:0 Count")
            await serve.wait_idle(sid, 120)
        cpu, wall = _cpu_s(serve.pid) - cpu0, time.perf_counter() - t0
        events = got[0].events - events0
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"readers": readers, "turns": turns, "serve_cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
            "serve_cpu_ms_per_turn": round(cpu / turns * 1000, 1), "events_per_reader": events,
            "serve_cpu_us_per_event": round(cpu / events * 1e6, 1) if events else None,
            "bytes_per_reader": got[0].bytes}


async def run(a: argparse.Namespace) -> dict[str, Any]:
    counts = [int(c) for c in a.readers.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-global-"))
    mock = MockLLM(log_path=work / "mock.jsonl")
    await mock.start()
    serve = OpencodeServe(a.opencode, work / "opencode", mock.base_url)
    await serve.start()
    try:
        await phase(serve, 1, 2, a.chunks)  # warm-up: first turns pay for the serve's own start
        out: list[dict[str, Any]] = []
        for _ in range(a.rounds):
            for n in counts:
                out.append(await phase(serve, n, a.turns, a.chunks))
                print(json.dumps(out[-1]), flush=True)
        return {"phases": out}
    finally:
        await serve.close()
        await mock.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opencode", default=os.environ.get("OPENCODE_BIN", ".opencode/node_modules/.bin/opencode"))
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--readers", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    a.opencode = str(Path(a.opencode).resolve())  # the serve runs in a directory of its own
    res = asyncio.run(run(a))
    res["machine"] = machine()
    res["load_average"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
