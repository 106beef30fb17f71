"""The per-stage table (`bench.wire_stages`) cannot silently rot: a quick run samples the real daemon with py-spy
over both measured phases, and its rows add up to the CPU per event `bench.wire` measured in the same run. The
daemon writes no log line per event (docs/operations.md, "Metrics per batch")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.stage_map import STAGES

ROOT = Path(__file__).resolve().parents[2]


def test_quick_stage_run_samples_both_phases_and_adds_up(database_url: str, tmp_path: Path) -> None:
    out = tmp_path / "stages.json"
    env = {**os.environ, "BRIDGE_DATABASE_URL": database_url, "TMPDIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "bench.wire_stages", "--quick", "--rate", "1000", "--keep", "--json",
                          str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["check"]["equal"] and r["sampler_problems"] == []
    assert set(r["stages"]) == {"catch_up", "burst"}
    for phase, t in r["stages"].items():
        assert list(t["us_per_event"]) == list(STAGES)
        assert t["cpu_us_per_event"] == r[phase]["cpu_us_per_event"]
        if t["samples"]:
            assert abs(sum(t["us_per_event"].values()) - t["cpu_us_per_event"]) < 1e-6 * t["cpu_us_per_event"]
    # the daemon was sampled: its own modules, not only the loop (a sampler reading another process would not)
    assert sum(t["samples"] for t in r["stages"].values()) > 0
    named = sum(us for t in r["stages"].values() for s, us in t["us_per_event"].items() if s != "the rest")
    assert named > 0
    assert r["hotpath_us_per_event"]["parse+normalize+prepare+link"] > 0
    assert "| **measured total** (/proc, all processes) |" in run.stdout
    # no log line per event: the daemon's lines (info level, as bench.wire runs it) are per session and per run,
    # and one per status transition (running / idle / interrupted: as many as the fake serve's activity polls
    # happen to see, a few per session, never one per event)
    lines = [ln for ln in (Path(r["work_dir"]) / "bridge.log").read_text().splitlines() if ln.startswith("{")]
    status = [ln for ln in lines if '"event": "session_status"' in ln]
    stored, sessions = r["check"]["stored_rows"], r["sessions"]
    assert stored == 220 and len(lines) - len(status) <= 5 * sessions + 40 < stored
    assert len(status) < stored / 2
