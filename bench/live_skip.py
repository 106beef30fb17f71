"""A worker's live reader on a burst's `/global/event`, alone (one process, no database, no sockets): what
dropping the frames of another worker's sessions before decoding them saves (docs/operations.md "Workers").

The frames are bench.wire's (bench.wire_workload: S sessions x B events, v2 and legacy mixed, a delta before
every v2 `*.ended`, round by round across the sessions as its fake serve publishes them), fed in 64 kB chunks
through the real reader (bridge.upstream.live.LiveStream) and dispatch table (bridge.dispatch.LiveDispatch)
over the in-memory transport. The sessions part is a stand-in that answers at once (what the real one does for
a session it does not follow: a dict lookup), so the figures are the reader's and the table's own CPU. Two
handlers, alternately, `--rounds` times:
- `all`: every frame decoded (one worker alone; or one of two before each dropped the other's frames);
- `half`: one of two workers now: the sessions whose home is the other worker (bridge.lease.home_worker)
  held there, their frames dropped undecoded.
CPU: time.process_time() from the first chunk to the handler's last frame, per upstream event of the burst.

Usage: python -m bench.live_skip [--sessions 1000] [--burst 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from typing import Any

from bench import wire_workload as w
from bridge.dispatch import LiveDispatch
from bridge.lease import home_worker
from bridge.upstream.live import LiveStream
from tests.support.memory_upstream import MemoryUpstream
from tests.support.tasks import in_background

END = "ses_benchend"
CHUNK = 65536


class Sessions:
    """The sessions part as the dispatch table asks it; `elsewhere`: sessions another worker holds."""

    def __init__(self, elsewhere: frozenset[str]) -> None:
        self.elsewhere = elsewhere
        self.done = asyncio.Event()

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        return False

    def notify_seen(self, session_id: str, seq: int) -> None:
        pass

    def twin(self, session_id: str, env: Any) -> None:
        pass

    def repair_all(self, cause: str) -> None:
        pass

    def upstream_status(self, session_id: str, status: Any) -> None:
        if session_id == END:
            self.done.set()

    async def deleted(self, session_id: str) -> None:
        pass

    def live_skip_reason(self, session_id: str) -> str | None:
        return "held_elsewhere" if session_id in self.elsewhere else None


def burst(sessions: int, events: int) -> tuple[bytes, int]:
    """The burst's /global/event bytes (seqs after a 20-event history, as bench.wire's) and its frame count."""
    body = b"".join(w.event(k, seq, 4).globals for seq in range(21, 21 + events) for k in range(sessions))
    end = b"data: " + json.dumps({"payload": {"id": "evt_benchend", "type": "session.status", "properties": {
        "sessionID": END, "status": {"type": "idle"}}}}, separators=(",", ":")).encode() + b"\n\n"
    return body + end, body.count(b"\ndata: ") + 1


async def one_run(data: bytes, elsewhere: frozenset[str]) -> float:
    """CPU seconds of the reader and the table over `data`."""
    up, sessions = MemoryUpstream(), Sessions(elsewhere)
    live = LiveStream(up.client(), LiveDispatch(sessions=sessions), reconnect_min_s=0.01, reconnect_max_s=0.1)
    async with in_background(live.run()):
        await asyncio.wait_for(live.connected.wait(), 10)
        start = time.process_time()
        for i in range(0, len(data), CHUNK):
            up.push_live(data[i:i + CHUNK])
        await asyncio.wait_for(sessions.done.wait(), 600)
        return time.process_time() - start


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    data, frames = burst(a.sessions, a.burst)
    events = a.sessions * a.burst
    other = frozenset(w.session_id(k) for k in range(a.sessions) if home_worker(w.session_id(k), 2) == 1)
    runs: dict[str, list[float]] = {"all": [], "half": []}
    print(f"{events} events, {frames} /global/event frames ({len(data) / events:.0f} B/event); "
          f"{len(other)} of {a.sessions} sessions at home on the other worker; load {os.getloadavg()[0]:.1f}")
    for _ in range(a.rounds):
        for mode in runs:
            cpu = await one_run(data, other if mode == "half" else frozenset())
            runs[mode].append(cpu / events * 1e6)
    for mode, us in runs.items():
        print(f"{mode:5s} CPU per upstream event: median {statistics.median(us):.1f} us "
              f"(runs {', '.join(f'{u:.1f}' for u in us)})")
    ratio = statistics.median(runs["half"]) / statistics.median(runs["all"])
    print(f"half / all: {ratio:.2f}; load {os.getloadavg()[0]:.1f}; {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")


if __name__ == "__main__":
    asyncio.run(main())
