"""The bridge's Python CPU per event on the ingest hot path, stage by stage (pure code, no database).

The events are `bench.write_path`'s tool-turn mix (`frames()`); each stage runs over all of them
`--repeat` times and prints the least CPU time per event (microseconds). `parse+normalize+prepare+link` is the sum the
write path pays in Python before the database (docs/mirror.md); GC is tuned as the daemon tunes it
(`bridge.perf.runtime.tune_gc`) unless `--gc-gen0 0`.

Usage: python -m bench.hotpath [--sessions 200] [--events 20] [--repeat 5] [--gc-gen0 N]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench.write_path_phases import frames
from bridge.events import normalize, parse_envelope, parse_frame
from bridge.perf.jsonload import strict_decode
from bridge.perf.runtime import GEN0_THRESHOLD, tune_gc
from bridge.store.hash_chain import link
from bridge.store.jsonb_text import jsonb_text
from bridge.store.writes.rows import prepare_event
from bridge.upstream.sse import SSEParser
from bridge.upstream.sync_answer import lone_surrogate


def _best(fn: Callable[[], Any], n: int, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()  # CPU time: what the stage costs, whoever else shares the cores
        out = fn()
        best = min(best, time.process_time() - t0)
    return best / n * 1e6, out


def _frame_all(chunks: list[bytes]) -> int:
    parser = SSEParser()
    return sum(len(parser.feed(c)) for c in chunks)


def stages(sessions: int, events: int, repeat: int) -> dict[str, float]:
    wire: list[str] = []
    for k in range(sessions):
        wire += frames(f"ses_b{k:05d}", events)
    n = len(wire)
    now = datetime.now(UTC)
    out: dict[str, float] = {}
    out["decode"], objs = _best(lambda: [strict_decode(f) for f in wire], n, repeat)
    out["json.loads (plain, reference)"], _ = _best(lambda: [json.loads(f) for f in wire], n, repeat)
    out["parse_envelope"], envs = _best(lambda: [parse_envelope(o) for o in objs], n, repeat)
    out["normalize"], evs = _best(lambda: [normalize(e) for e in envs], n, repeat)
    out["jsonb_text (in prepare_event)"], _ = _best(lambda: [jsonb_text(e.raw) for e in envs], n, repeat)
    out["prepare_event"], ps = _best(
        lambda: [prepare_event("u", e.session_id or "", ev, now) for e, ev in zip(envs, evs, strict=True)], n, repeat)
    out["link"], _ = _best(lambda: [link("0" * 64, p.seq, p.event_id, p.payload_text) for p in ps], n, repeat)
    out["parse_frame+normalize"], _ = _best(lambda: [normalize(parse_frame(f)) for f in wire], n, repeat)
    # The durable stream's framing: a read per event (a burst, every session keeping up) and 16 KiB reads
    # (a catch-up's backlog); the sync log answer's surrogate check over the same events as one answer.
    reads = [f"data: {f}\n\n".encode() for f in wire]
    body = b"".join(reads)
    out["sse framing, a read per event"], _ = _best(lambda: _frame_all(reads), n, repeat)
    big = [body[i:i + 16384] for i in range(0, len(body), 16384)]
    out["sse framing, 16 KiB reads"], _ = _best(lambda: _frame_all(big), n, repeat)
    answer = ("[" + ",".join(wire) + "]").encode()
    out["sync answer surrogate check"], _ = _best(lambda: lone_surrogate(answer, final=True), n, repeat)

    def whole() -> list[str]:
        prev, links = "0" * 64, []
        for f in wire:
            ev = normalize(parse_frame(f))
            p = prepare_event("u", ev.session_id or "", ev, now)
            prev = link(prev, p.seq, p.event_id, p.payload_text)
            links.append(prev)
        return links

    out["parse+normalize+prepare+link"], _ = _best(whole, n, repeat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5, help="runs per stage; the fastest counts")
    ap.add_argument("--gc-gen0", type=int, default=GEN0_THRESHOLD, help="0: CPython's default GC, untuned")
    a = ap.parse_args()
    if a.gc_gen0:
        tune_gc(a.gc_gen0)
    gc.collect()
    res = stages(a.sessions, a.events, a.repeat)
    for name, us in res.items():
        print(f"{name:34s} {us:6.2f} us/event")


if __name__ == "__main__":
    main()
