"""bench.wire_workers, the table `make bench` prints for one worker and two: the runs alternate their order round
by round, the ratios are each round's own (never across rounds), and a failed run shows and fails the bench."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import wire_workers


def result(workers: int, catch_up: float, burst: float, rc: int = 0) -> dict[str, Any]:
    return {"workers": workers, "rc": rc, "load": (1.0, 2.0), "warm_sessions": 1000.0, "check": {"equal": rc == 0},
            "catch_up": {"events_per_s": catch_up, "over_copy": 0.1, "cpu_us_per_event": 120.0,
                         "sessions_per_owner": [500, 500] if workers == 2 else [1000]},
            "burst": {"events_per_s": burst, "over_copy": 0.1, "cpu_us_per_event": 150.0},
            "idle": {"cpu_percent_of_a_core": 0.6}}


def test_rounds_alternate_the_order_and_keep_the_columns_by_count(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[int] = []

    def fake_run(workers: int, wire_args: list[str], out: Path) -> dict[str, Any]:
        order.append(workers)
        assert wire_args == ["--sessions", "10"]
        return result(workers, 100.0 * workers, 50.0)

    monkeypatch.setattr(wire_workers, "run_wire", fake_run)
    rounds = wire_workers.runs([1, 2], 3, ["--sessions", "10"])
    assert order == [1, 2, 2, 1, 1, 2]
    assert [[r["workers"] for r in rnd] for rnd in rounds] == [[1, 2]] * 3


def test_the_table_prints_each_rounds_ratio_and_a_missing_phase_as_a_dash() -> None:
    rounds = [[result(1, 1000.0, 700.0), result(2, 1500.0, 700.0)],
              [result(1, 2000.0, 700.0), {"workers": 2, "rc": 1, "load": (3.0, 4.0)}]]
    text = wire_workers.table(rounds)
    assert "round 1: W=2 / W=1 events/s: catch-up 1.50x, burst 1.00x" in text
    assert "round 2: W=2 / W=1 events/s: catch-up —x, burst —x" in text  # a run that failed: no ratio
    assert "| sessions per lease holder | 1000 | 500 + 500 | 1000 |  |" in text
    assert "| stored == upstream; exit status | True; 0 | True; 0 | True; 0 | None; 1 |" in text
