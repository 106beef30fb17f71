"""Where the whole daemon's CPU per event goes, stage by stage (the per-stage table of BENCHMARKS.md).

Runs `bench.wire`'s workload and measurement unchanged (the real `opencode-bridge run` in its own process
against `bench.wire_serve`, the complete wire, 1,000 sessions x 20 events then a burst of 20 each, embedded
PostgreSQL with fsync on) with a short idle window, and samples the daemon with **py-spy** (`py-spy record
--nonblocking`: another process reads the daemon's stacks from its memory, the daemon is never paused or
instrumented) over exactly the two measured phases: from the catch-up's first upstream request to its last
stored row, and from the burst's start to its last stored row. py-spy keeps only samples of threads that are
running (not waiting in `epoll`), so a sample is CPU time. Each sample goes to a stage by its innermost
frame that `bench.stage_map.RULES` names; a stage's µs per event is its share of the samples times the
phase's CPU per event measured from `/proc/<pid>/stat` (as `bench.wire` reports it), so the rows add up
to the measured total. Printed beside it: `bench.hotpath`'s pure parse → normalize → prepare → link.

Usage: python -m bench.wire_stages [--sessions 1000] [--events 20] [--burst 20] [--rate 250] [--json FILE]
       [--keep] | --quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import hotpath, wire
from bench.stage_map import StageTable, tabulate
from bench.wire_procs import measured
from bridge.perf.runtime import GEN0_THRESHOLD, tune_gc

PHASES = ("catch_up", "burst")
TOLD = ("ingest bookkeeping", "metrics and logs", "the rest")  # their frames printed: where to look next


class Sampler:
    """py-spy attached to the daemon (and its workers) over each phase, one raw file per phase."""

    def __init__(self, work: Path, rate: int) -> None:
        self.work, self.rate = work, rate
        self.binary = str(Path(sys.executable).parent / "py-spy")
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.done: dict[str, subprocess.Popen[bytes]] = {}

    def path(self, phase: str) -> Path:
        return self.work / f"stages-{phase}.txt"

    def hook(self, what: str, pid: int) -> None:
        if not what.startswith("/"):
            argv = [self.binary, "record", "--pid", str(pid), "--rate", str(self.rate), "--format", "raw",
                    "--output", str(self.path(what)), "--nonblocking", "--full-filenames", "--subprocesses"]
            self.running[what] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elif (proc := self.running.pop(what[1:], None)) is not None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT; waited for at the end
            self.done[what[1:]] = proc

    def finish(self) -> tuple[list[str], dict[str, float]]:
        """Wait for every sampler: their complaints, if any, and each one's own CPU seconds, by phase (what
        sampling took from the shared cores; the daemon itself is never paused)."""
        problems, cpu = [], {}
        for phase, proc in [*self.done.items(), *self.running.items()]:
            if phase in self.running:
                proc.send_signal(signal.SIGINT)  # (a phase that never ended: the run failed)
            assert proc.stderr is not None
            err = proc.stderr.read()  # to its end: the sampler has exited
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            cpu[phase] = usage.ru_utime + usage.ru_stime
            if proc.returncode != 0:
                problems.append(err.decode(errors="replace")[-500:])
        return problems, cpu


def hotpath_us() -> dict[str, float]:
    """bench.hotpath's pure per-event stages (parse → normalize → prepare → link), in this process, the GC tuned
    as the daemon tunes it."""
    tune_gc(GEN0_THRESHOLD)
    return hotpath.stages(200, 20, 5)


def tables(res: dict[str, Any], sampler: Sampler) -> dict[str, StageTable]:
    out = {}
    for phase in PHASES:
        f = sampler.path(phase)
        if phase in res and f.exists():
            out[phase] = tabulate(f.read_text().splitlines(), res[phase]["cpu_us_per_event"])
    return out


def render(res: dict[str, Any], by_phase: dict[str, StageTable], hot: dict[str, float]) -> str:
    phases = [p for p in PHASES if p in by_phase]
    head = "| stage, µs of CPU per event | " + " | ".join(f"{p.replace('_', '-')} (share)" for p in phases) + " |"
    lines = [head, "|---|" + "---:|" * len(phases)]
    for i, (stage, *_rest) in enumerate(by_phase[phases[0]].rows()):
        cells = []
        for p in phases:
            _, _, share, us = by_phase[p].rows()[i]
            cells.append(f"{us:.1f} ({share * 100:.1f} %)")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    lines.append("| **measured total** (/proc, all processes) | " + " | ".join(
        f"**{res[p]['cpu_us_per_event']:.1f}**" for p in phases) + " |")
    lines.append("| samples | " + " | ".join(str(by_phase[p].total) for p in phases) + " |")
    lines.append("| events/s; / COPY of the same run | " + " | ".join(
        f"{res[p]['events_per_s']:.0f}; {res[p]['over_copy']:.3f}x" for p in phases) + " |")
    lines.append("| the sampler's own CPU, % of the daemon's | " + " | ".join(
        f"{res['sampler_cpu_s'].get(p, 0.0) / (res[p]['cpu_us_per_event'] * res[p]['events'] / 1e6) * 100:.1f} %"
        for p in phases) + " |")
    lines.append("\nbench.hotpath, same run (pure code, no I/O; µs per event): " + ", ".join(
        f"{k} {v:.1f}" for k, v in hot.items() if k != "json.loads (plain, reference)"))
    for p in phases:
        for stage in TOLD:
            top = "; ".join(f"{name} {n}" for name, n in by_phase[p].top.get(stage, []))
            lines.append(f"{p.replace('_', '-')}, {stage}, by caller < deciding frame (samples): {top}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    wire.workload_args(ap, "BRIDGE_WORKERS of the daemon (sampled: all processes)")
    ap.add_argument("--rate", type=int, default=250,
                    help="py-spy samples per second; 0: the same run unsampled (what the sampler costs the daemon)")
    a = ap.parse_args()
    # bench.wire's measurement with a short idle window (idle is not this table's) and a short naive baseline
    a.idle_seconds, a.settle_seconds, a.naive_seconds, a.profile = 1.0, 1.0, 1.0, None
    if a.quick:
        a.sessions, a.events, a.burst, a.timeout = 20, 5, 5, 60.0
    samplers: list[Sampler] = []

    async def measure(work: Path, url: str) -> dict[str, Any]:
        if a.rate:
            samplers.append(Sampler(work, a.rate))
            a.phase_hook = samplers[0].hook
        return await wire.measure(a, work, url)

    res, work = measured("bridge-stages-", measure)
    problems, sampler_cpu = samplers[0].finish() if samplers else ([] if not a.rate else ["never started"], {})
    by_phase = tables(res, samplers[0]) if samplers else {}
    hot = hotpath_us()
    res["stages"] = {p: {"samples": t.total, "cpu_us_per_event": t.cpu_us_per_event,
                         "us_per_event": {s: us for s, _, _, us in t.rows()}, "top": t.top}
                     for p, t in by_phase.items()}
    res["hotpath_us_per_event"] = hot
    res["sampler_problems"] = problems
    res["sampler_cpu_s"] = sampler_cpu
    res["load_average_end"] = os.getloadavg()
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(wire.summary(res))
    print(f"load average: start {res['load_average_start']}, end {res['load_average_end']}; {res['machine']}")
    ok = (bool(by_phase) or not a.rate) and not problems and res["check"]["equal"]
    print(render(res, by_phase, hot) if by_phase else f"no samples: {problems or 'unsampled (--rate 0)'}")
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
