"""Metrics per batch (bridge.perf.metric_batch): the same series as one update per event, in one update per batch."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from bench.write_path_phases import frames
from bridge import metrics
from bridge.events import normalize, parse_frame
from bridge.perf.metric_batch import child, observe_many
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
