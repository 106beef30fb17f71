"""The worker set's state (bridge.workers.set_state): what the parent writes, and how any worker judges it for
`/readyz` and `/livez` — ready only when every worker is, a stale or missing file never ready, never half read."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from bridge.workers.set_state import (
    STALE_MARGIN_S,
    STALE_TICKS,
    SetView,
    liveness,
    metrics_text,
    parse,
    readiness,
    snapshot,
    write_atomic,
)


def state(ready: dict[int, bool], *, count: int = 2, stopping: bool = False, now: float = 1000.0) -> dict[str, object]:
    status = {i: ("following 3 sessions" if r else "restarting") for i, r in ready.items()}
    return snapshot(count, ready, status, {i: 100 + i for i in ready}, {1: 2}, stopping=stopping, tick_s=5.0,
                    now=now)


def test_every_worker_ready_is_the_set_ready_whoever_answers() -> None:
    s = state({0: True, 1: True})
    for me in (0, 1):
        assert readiness(s, 1001.0, me) == {"ok": True, "answered_by": f"w{me}", "ready": "2/2"}
        assert liveness(s, 1001.0, me) == (True, {"answered_by": f"w{me}", "workers": "2/2 ready"})


def test_one_worker_restarting_makes_the_set_not_ready_and_names_it_but_leaves_it_alive() -> None:
    s = state({0: True, 1: False})
    check = readiness(s, 1001.0, 0)
    assert check == {"ok": False, "answered_by": "w0", "ready": "1/2", "not_ready": {"w1": "restarting"}}
    assert liveness(s, 1001.0, 0) == (True, {"answered_by": "w0", "workers": "1/2 ready"})
    # a slot never started yet (no status line) reads "starting"
    fresh = snapshot(2, {0: True}, {}, {0: 7}, {}, stopping=False, tick_s=5.0, now=0.0)
    assert readiness(fresh, 0.0, 0)["not_ready"] == {"w1": "starting"}


def test_a_stopping_set_is_not_ready_even_with_every_worker_up() -> None:
    check = readiness(state({0: True, 1: True}, stopping=True), 1001.0, 1)
    assert check["ok"] is False and check["stopping"] is True


def test_a_parent_that_stopped_writing_fails_both_probes_and_a_missing_file_too() -> None:
    s = state({0: True, 1: True})
    limit = 1000.0 + STALE_TICKS * 5.0 + STALE_MARGIN_S
    assert readiness(s, limit, 0)["ok"] is True
    late = readiness(s, limit + 1.0, 0)
    assert late["ok"] is False and "has not written" in late["not_ready"]
    assert liveness(s, limit + 1.0, 0)[0] is False
    assert readiness(None, 0.0, 0)["ok"] is False
    assert liveness(None, 0.0, 0)[0] is False


@given(st.text(max_size=200))
def test_any_text_is_either_the_parents_state_or_none(raw: str) -> None:
    parsed = parse(raw)
    assert parsed is None or isinstance(parsed["workers"], list)
    assert readiness(parsed, 0.0, 0)["ok"] in (True, False)


@given(st.dictionaries(st.integers(0, 5), st.booleans()), st.booleans())
def test_ready_exactly_when_every_slot_is_ready_and_not_stopping(ready: dict[int, bool], stopping: bool) -> None:
    s = snapshot(6, ready, {}, {}, {}, stopping=stopping, tick_s=1.0, now=0.0)
    every = all(ready.get(i) for i in range(6))
    check = readiness(json.loads(json.dumps(s)), 0.0, 3)
    assert check["ok"] is (every and not stopping)
    assert set(check.get("not_ready", {})) == {f"w{i}" for i in range(6) if not ready.get(i)}


async def test_a_reader_never_sees_half_a_write(tmp_path: Path) -> None:
    path = tmp_path / "set.json"
    write_atomic(path, state({0: True, 1: True}))
    stop = threading.Event()

    def writer() -> None:
        flip = False
        while not stop.is_set():
            flip = not flip
            write_atomic(path, state({0: True, 1: flip}))

    t = threading.Thread(target=writer)
    t.start()
    try:
        view = SetView(path, 1, clock=lambda: 1000.0)
        seen = {(await view.readiness())["ready"] for _ in range(2000)}
    finally:
        stop.set()
        t.join()
    assert seen <= {"1/2", "2/2"} and seen  # never a missing or torn file
    assert not await asyncio.to_thread(lambda: list(tmp_path.glob(".set.json.*")))  # no temporary file left


def test_the_sets_series_parse_as_prometheus_text_one_per_worker() -> None:
    families = {f.name: f for f in text_string_to_metric_families(metrics_text(state({0: True, 1: False}), 1002.5))}
    assert {(s.labels["worker"], s.value) for s in families["bridge_worker_ready"].samples} == {("0", 1), ("1", 0)}
    assert {(s.labels["worker"], s.value) for s in families["bridge_worker_restarts"].samples} == {("0", 0), ("1", 2)}
    assert families["bridge_worker_state_age_seconds"].samples[0].value == 2.5
    assert metrics_text(None, 0.0) == ""
