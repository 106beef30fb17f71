"""Metrics per batch (bridge.perf.metric_batch): the same series as one update per event, in one update per batch."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from bench.write_path_phases import frames
from bridge import metrics
from bridge.events import normalize, parse_frame
from bridge.perf.metric_batch import Tally, child, observe_many
from bridge.upstream import ingest

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
values = st.lists(st.one_of(st.sampled_from([0.0, *BUCKETS, 31.0, math.inf]),
                            st.floats(0, 100, allow_nan=False)), max_size=60)


def _series(reg: CollectorRegistry) -> dict[tuple[str, str], object]:
    """Every sample but `_created` (the time each histogram was made); the sum rounded to 9 significant digits
    (a batch's values are added up before the sum: the last bits may differ), NaN as a string so it compares."""
    def value(name: str, v: float) -> object:
        return repr(v) if math.isnan(v) else float(f"{v:.9g}") if name.endswith("_sum") else v
    return {(s.name, repr(sorted(s.labels.items()))): value(s.name, s.value)
            for fam in reg.collect() for s in fam.samples if not s.name.endswith("_created")}


def _pair() -> tuple[CollectorRegistry, Histogram, CollectorRegistry, Histogram]:
    r1, r2 = CollectorRegistry(), CollectorRegistry()
    return r1, Histogram("h_seconds", "x", registry=r1, buckets=BUCKETS), \
        r2, Histogram("h_seconds", "x", registry=r2, buckets=BUCKETS)


@given(values, values)
def test_observe_many_gives_the_series_of_one_observe_per_value(first: list[float], second: list[float]) -> None:
    r1, one_by_one, r2, batched = _pair()
    for batch in (first, second):
        for v in batch:
            one_by_one.observe(v)
        assert observe_many(batched, batch) == len(batch)
    assert _series(r1) == _series(r2)


def test_nan_goes_to_the_sum_only_as_observe_does() -> None:
    r1, one_by_one, r2, batched = _pair()
    one_by_one.observe(math.nan)
    one_by_one.observe(0.2)
    observe_many(batched, [math.nan, 0.2])
    assert _series(r1) == _series(r2)


def test_a_labelled_parent_is_refused_as_observe_refuses_it() -> None:
    h = Histogram("l_seconds", "x", ["a"], registry=CollectorRegistry())
    with pytest.raises(ValueError):
        observe_many(h, [1.0])
    assert observe_many(h, []) == 0  # nothing to observe: nothing refused


def test_child_is_the_labelled_child_kept() -> None:
    reg = CollectorRegistry()
    c = Counter("c_total", "x", ["kind", "source"], registry=reg)
    assert child(c, "k", "stream") is c.labels(kind="k", source="stream")
    assert child(c, "k", "stream") is child(c, "k", "stream")
    child(c, "k", "stream").inc(3)
    assert reg.get_sample_value("c_total", {"kind": "k", "source": "stream"}) == 3


class _Counting:
    """A metric value that counts its updates (prometheus_client's MutexValue interface)."""

    def __init__(self, inner: Any, calls: list[float]) -> None:
        self._inner, self._calls = inner, calls

    def inc(self, amount: float) -> None:
        self._calls.append(amount)
        self._inner.inc(amount)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_stored_batch_moves_the_metrics_by_its_size_in_one_update(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 40
    batch = [normalize(parse_frame(f)) for f in frames("ses_metricbatch", n)][:n]
    assert len(batch) == n and all(ev.timestamp_ms is not None for ev in batch)
    reg = CollectorRegistry()
    lag = Histogram("bridge_upstream_to_commit_seconds", "x", registry=reg, buckets=BUCKETS)
    ingested = Counter("bridge_events_ingested_total", "x", ["kind", "source"], registry=reg)
    updates: list[float] = []
    lag._sum = _Counting(lag._sum, updates)
    lag._buckets = [_Counting(b, updates) for b in lag._buckets]
    monkeypatch.setattr(metrics, "UPSTREAM_TO_COMMIT", lag)
    monkeypatch.setattr(metrics, "EVENTS_INGESTED", ingested)
    kinds = {ev.kind for ev in batch}

    ingest._observe(batch, 0.01, "stream")

    assert reg.get_sample_value("bridge_upstream_to_commit_seconds_count") == n
    # one update of the sum and one per bucket touched (these events all wait alike: one bucket), not 2 per event
    assert len(updates) <= 1 + len(BUCKETS) + 1 and len(updates) < n
    assert sum(reg.get_sample_value("bridge_events_ingested_total", {"kind": str(k), "source": "stream"}) or 0
               for k in kinds) == n


async def test_the_batches_of_one_loop_turn_are_written_once_at_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst stores a batch of one or two events per session: a turn's batches cost one update per series."""
    events = [normalize(parse_frame(f)) for f in frames("ses_metricturn", 30)][:30]
    reg = CollectorRegistry()
    lag = Histogram("bridge_upstream_to_commit_seconds", "x", registry=reg, buckets=BUCKETS)
    batches = Histogram("bridge_write_batch_events", "x", registry=reg, buckets=(1, 2, 5))
    ingested = Counter("bridge_events_ingested_total", "x", ["kind", "source"], registry=reg)
    updates: list[float] = []
    lag._sum = _Counting(lag._sum, updates)
    lag._buckets = [_Counting(b, updates) for b in lag._buckets]
    for name, value in (("UPSTREAM_TO_COMMIT", lag), ("BATCH_SIZE", batches), ("EVENTS_INGESTED", ingested)):
        monkeypatch.setattr(metrics, name, value)

    for ev in events:  # thirty batches of one event in one turn
        ingest._observe([ev], 0.002, "twin")
    assert reg.get_sample_value("bridge_upstream_to_commit_seconds_count") == 0  # not before the turn ends
    await asyncio.sleep(0)

    assert reg.get_sample_value("bridge_upstream_to_commit_seconds_count") == 30
    assert reg.get_sample_value("bridge_write_batch_events_count") == 30  # still one observation per batch
    assert reg.get_sample_value("bridge_write_batch_events_bucket", {"le": "1.0"}) == 30
    assert len(updates) <= 1 + len(BUCKETS) + 1  # not 2 per batch
    total = sum(s.value for fam in reg.collect() if fam.name == "bridge_events_ingested" for s in fam.samples
                if s.name == "bridge_events_ingested_total")
    assert total == 30


async def test_a_tally_counts_unlabelled_and_labelled_counters() -> None:
    reg = CollectorRegistry()
    plain = Counter("p_total", "x", registry=reg)
    labelled = Counter("l_total", "x", ["what"], registry=reg)
    tally = Tally()
    for _ in range(5):
        tally.count(plain, ())
        tally.count(labelled, ("a",), 2)
    await asyncio.sleep(0)
    assert reg.get_sample_value("p_total") == 5
    assert reg.get_sample_value("l_total", {"what": "a"}) == 10
    tally.count(plain, ())
    tally.flush()  # at once when asked
    assert reg.get_sample_value("p_total") == 6


def test_a_loop_closed_before_its_turn_ended_does_not_stop_the_tally() -> None:
    reg = CollectorRegistry()
    plain = Counter("q_total", "x", registry=reg)
    tally = Tally()
    closed = asyncio.new_event_loop()
    closed.close()
    tally._due = closed  # a flush was due on a loop closed before its turn ended (as a test's loop may be)

    async def count() -> None:
        tally.count(plain, ())
        await asyncio.sleep(0)
        assert reg.get_sample_value("q_total") == 1

    asyncio.run(count())
