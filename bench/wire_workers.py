"""The whole daemon on the real wire with one worker and more, in one run (numbers for BENCHMARKS.md "Workers").

`bench.wire` (one embedded PostgreSQL, the fake serve, the real `opencode-bridge run`) once per
`BRIDGE_WORKERS` count, back to back, the order alternated round by round (a round of 1,2 then 2,1), then one
table: each run's catch-up and burst (events/s, / COPY of the same run, CPU per event of every process of the
set), idle CPU with every session warm, sessions per lease holder, and each count's events/s over the first
count's, per round (ratios within one run: the machine is shared). The load average is printed per run.
Exits 1 when any run did (a check failed: stored != upstream, or a phase incomplete).

Usage: python -m bench.wire_workers [--workers 1,2] [--rounds 1] [--json FILE] [bench.wire's options...]
e.g. python -m bench.wire_workers --workers 1,2 --sessions 1000 --events 20 --burst 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def run_wire(workers: int, wire_args: list[str], out: Path) -> dict[str, Any]:
    """One `bench.wire` run with BRIDGE_WORKERS=`workers`; its results, `rc` and the load average around it."""
    load_before = os.getloadavg()
    rc = subprocess.run([sys.executable, "-m", "bench.wire", *wire_args, "--workers", str(workers),
                         "--json", str(out)], check=False).returncode
    res: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    res.update(rc=rc, workers=workers, load=(load_before[0], os.getloadavg()[0]))
    return res


def runs(counts: list[int], rounds: int, wire_args: list[str]) -> list[list[dict[str, Any]]]:
    """Every count once per round, the order reversed every other round; each round's results by count."""
    out: list[list[dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-wire-workers-") as tmp:
        for r in range(rounds):
            order = counts if r % 2 == 0 else counts[::-1]
            done = {w: run_wire(w, wire_args, Path(tmp) / f"r{r}-w{w}.json") for w in order}
            out.append([done[w] for w in counts])
    return out


def _phase(res: dict[str, Any], phase: str, key: str) -> float | None:
    value = res.get(phase, {}).get(key)
    return float(value) if value is not None else None


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def table(rounds: list[list[dict[str, Any]]]) -> str:
    """One row per figure, one column per run (round r, W workers), then the ratios to each round's first count."""
    cols = [(r, res) for r, results in enumerate(rounds) for res in results]
    head = "| figure | " + " | ".join(f"r{r + 1} W={res['workers']}" for r, res in cols) + " |"
    rows: list[tuple[str, Any]] = [
        ("catch-up: events/s", lambda x: _fmt(_phase(x, "catch_up", "events_per_s"), ",.0f")),
        ("catch-up / COPY", lambda x: _fmt(_phase(x, "catch_up", "over_copy"), ".3f")),
        ("catch-up CPU per event (all processes), µs",
         lambda x: _fmt(_phase(x, "catch_up", "cpu_us_per_event"), ".0f")),
        ("catch-up: the serve's / PostgreSQL and the rest's CPU per event, µs",
         lambda x: f"{_fmt(_phase(x, 'catch_up', 'serve_cpu_us_per_event'), '.0f')} / "
                   f"{_fmt(_phase(x, 'catch_up', 'rest_cpu_us_per_event'), '.0f')}"),
        ("catch-up: cores busy", lambda x: _fmt(_phase(x, "catch_up", "machine_cores_busy"), ".2f")),
        ("burst: events/s", lambda x: _fmt(_phase(x, "burst", "events_per_s"), ",.0f")),
        ("burst / COPY", lambda x: _fmt(_phase(x, "burst", "over_copy"), ".3f")),
        ("burst CPU per event, µs", lambda x: _fmt(_phase(x, "burst", "cpu_us_per_event"), ".0f")),
        ("burst: the serve's / PostgreSQL and the rest's CPU per event, µs",
         lambda x: f"{_fmt(_phase(x, 'burst', 'serve_cpu_us_per_event'), '.0f')} / "
                   f"{_fmt(_phase(x, 'burst', 'rest_cpu_us_per_event'), '.0f')}"),
        ("burst: cores busy (of the machine's)", lambda x: _fmt(_phase(x, "burst", "machine_cores_busy"), ".2f")),
        ("idle CPU, every session warm, % of a core (the set)",
         lambda x: _fmt(_phase(x, "idle", "cpu_percent_of_a_core"), ".2f")),
        ("warm sessions", lambda x: _fmt(x.get("warm_sessions"), ",.0f")),
        ("sessions per lease holder", lambda x: " + ".join(map(str, x.get("catch_up", {}).get("sessions_per_owner",
                                                                                              [])))),
        ("stored == upstream; exit status", lambda x: f"{x.get('check', {}).get('equal')}; {x['rc']}"),
        ("load average, start → end", lambda x: f"{x['load'][0]:.1f} → {x['load'][1]:.1f}"),
    ]
    lines = [head, "|---|" + "---:|" * len(cols)]
    lines += [f"| {name} | " + " | ".join(cell(res) for _, res in cols) + " |" for name, cell in rows]
    for r, results in enumerate(rounds):
        first = results[0]
        for res in results[1:]:
            parts = []
            for phase in ("catch_up", "burst"):
                a, b = _phase(first, phase, "events_per_s"), _phase(res, phase, "events_per_s")
                parts.append(f"{phase.replace('_', '-')} {_fmt(b / a if a and b else None, '.2f')}x")
            lines.append(f"round {r + 1}: W={res['workers']} / W={first['workers']} events/s: " + ", ".join(parts))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,2", help="BRIDGE_WORKERS counts, the first is the ratios' base")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", help="also write every run's results here")
    a, wire_args = ap.parse_known_args()
    counts = [int(w) for w in a.workers.split(",") if w]
    results = runs(counts, a.rounds, wire_args)
    print(table(results))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
    sys.exit(0 if all(res["rc"] == 0 for results_ in results for res in results_) else 1)


if __name__ == "__main__":
    main()
