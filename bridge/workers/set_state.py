"""The worker set's state as every worker answers it (docs/operations.md "Workers", "One `/readyz` for the set").

The parent writes one small JSON file in its private runtime directory at every change of a worker (started,
ready, died) and at least once per watch tick, atomically (a temporary file renamed over it: a reader sees the
old state or the new one, never half); each worker reads it when it answers `/readyz`, `/livez` or `/metrics`.
So whichever worker accepts a probe answers for the whole set: ready when every worker is (as the parent's
`READY=1` to systemd), naming the workers that are not. A file the parent stopped writing (its loop wedged or
gone) fails both probes. Reading and judging are pure functions of the file's text and the clock.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# The state is stale when the parent has not written it for this many of its watch ticks (plus a margin for a
# slow disk or a busy machine): its loop no longer runs.
STALE_TICKS = 3
STALE_MARGIN_S = 5.0


def snapshot(expected: int, ready: Mapping[int, bool], status: Mapping[int, str], pids: Mapping[int, int],
             restarts: Mapping[int, int], *, stopping: bool, tick_s: float, now: float) -> dict[str, Any]:
    """What the parent writes: every worker slot's pid (0: none running), readiness, last `STATUS=` line and how
    many times it was started again."""
    return {
        "written_at": now, "stale_after_s": STALE_TICKS * tick_s + STALE_MARGIN_S, "stopping": stopping,
        "workers": [{"index": i, "pid": pids.get(i, 0), "ready": bool(ready.get(i)), "status": status.get(i, ""),
                     "restarts": restarts.get(i, 0)} for i in range(expected)],
    }


def write_atomic(path: Path, state: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(state, separators=(",", ":")))
    os.replace(tmp, path)


def parse(raw: str | None) -> dict[str, Any] | None:
    """The file's text, or None when it is missing or not what the parent writes."""
    if raw is None:
        return None
    try:
        state = json.loads(raw)
    except ValueError:
        return None
    ok = isinstance(state, dict) and isinstance(state.get("workers"), list) and isinstance(
        state.get("written_at"), (int, float)) and isinstance(state.get("stale_after_s"), (int, float))
    return state if ok else None


def _stale_s(state: Mapping[str, Any], now: float) -> float:
    """How late the parent's write is (0.0 when it is fresh)."""
    late = now - float(state["written_at"])
    return round(late, 1) if late > float(state["stale_after_s"]) else 0.0


def readiness(state: Mapping[str, Any] | None, now: float, me: int) -> dict[str, Any]:
    """The `/readyz` check `workers`: ok when the state is fresh, the set is not stopping and every worker said
    `READY=1` since it (re)started; `not_ready` names the others (`w1: restarting`); `answered_by` is `me`."""
    base: dict[str, Any] = {"answered_by": f"w{me}"}
    if state is None:
        return {"ok": False, **base, "not_ready": "the worker set's state is missing (the parent gone?)"}
    if late := _stale_s(state, now):
        return {"ok": False, **base, "not_ready": f"the parent has not written the set's state for {late} s"}
    workers = state["workers"]
    waiting = {f"w{w.get('index')}": str(w.get("status") or "starting") for w in workers if not w.get("ready")}
    check = {"ok": not waiting and not state.get("stopping"), **base,
             "ready": f"{len(workers) - len(waiting)}/{len(workers)}"}
    if state.get("stopping"):
        check["stopping"] = True
    if waiting:
        check["not_ready"] = waiting
    return check


def liveness(state: Mapping[str, Any] | None, now: float, me: int) -> tuple[bool, dict[str, Any]]:
    """`/livez` of the set: alive while the parent keeps the state fresh (it restarts dead workers); the body
    says how many workers are ready. A worker not ready is not a dead set: only a silent parent is."""
    if state is None:  # written before any worker started: missing means the parent removed it, ending
        return False, {"answered_by": f"w{me}", "workers": "the worker set's state is missing (the parent gone?)"}
    if late := _stale_s(state, now):
        return False, {"answered_by": f"w{me}", "workers": f"the parent has not written their state for {late} s"}
    workers = state["workers"]
    return True, {"answered_by": f"w{me}",
                  "workers": f"{sum(1 for w in workers if w.get('ready'))}/{len(workers)} ready"}


def metrics_text(state: Mapping[str, Any] | None, now: float) -> str:
    """The set's series for `/metrics` (Prometheus text): each worker's readiness and restarts, by its index (a
    bounded label: at most the host's cores). Nothing when the file is missing: `/readyz` says why."""
    if state is None:
        return ""
    workers = state["workers"]
    ready = [f'bridge_worker_ready{{worker="{w.get("index")}"}} {1 if w.get("ready") else 0}' for w in workers]
    restarts = [f'bridge_worker_restarts_total{{worker="{w.get("index")}"}} {int(w.get("restarts") or 0)}'
                for w in workers]
    return "\n".join([
        "# HELP bridge_worker_ready 1 when the worker (BRIDGE_WORKERS) said READY=1 since it last started",
        "# TYPE bridge_worker_ready gauge", *ready,
        "# HELP bridge_worker_restarts_total Times the parent started the worker again (it died or was wedged)",
        "# TYPE bridge_worker_restarts_total counter", *restarts,
        "# HELP bridge_worker_state_age_seconds Seconds since the parent last wrote the set's state",
        "# TYPE bridge_worker_state_age_seconds gauge",
        f"bridge_worker_state_age_seconds {max(0.0, now - float(state['written_at'])):.3f}", ""])


class SetView:
    """A worker's view of its set: the file read at every probe (a few hundred bytes: cheaper than a cache)."""

    def __init__(self, path: Path, index: int, clock: Callable[[], float] = time.time) -> None:
        self._path = path
        self._index = index
        self._clock = clock  # wall clock: the parent's `written_at` is one too, on the same host

    def _read(self) -> dict[str, Any] | None:
        try:
            return parse(self._path.read_text())
        except OSError:
            return None

    async def readiness(self) -> dict[str, Any]:
        return readiness(self._read(), self._clock(), self._index)

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        return liveness(self._read(), self._clock(), self._index)

    def metrics_text(self) -> bytes:
        return metrics_text(self._read(), self._clock()).encode()
