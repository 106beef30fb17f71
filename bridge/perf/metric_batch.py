"""Metric updates once per batch, not once per event (docs/operations.md, "Metrics per batch").

- `observe_many(histogram, values)`: a batch's values into a histogram with one update per bucket touched and
  one of the sum: the same `_bucket`, `_count` and `_sum` series as one `observe` per value (it reads the
  histogram's bounds and values, prometheus_client's own fields: tests/unit/test_metric_batch.py compares the
  two on every release the project pins).
- `child(metric, *label_values)`: a labelled metric's child, looked up once per label values: `labels()` checks
  and converts its arguments and takes the metric's lock on every call, a cost per event on a hot path.
Neither changes a metric's name, labels or meaning.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Any, TypeVar

from prometheus_client import Histogram
from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)

_children: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = {}  # the metric kept: no id reused


def observe_many(histogram: Histogram, values: Iterable[float]) -> int:
    """`histogram.observe(v)` for every value, in one update per bucket touched; how many values."""
    bounds: list[float] = histogram._upper_bounds  # ascending, the last one +Inf
    counts = [0] * len(bounds)
    total, n = 0.0, 0
    for v in values:
        total += v
        n += 1
        if v == v:  # NaN: in the sum, in no bucket (as observe() does)
            counts[bisect_left(bounds, v)] += 1
    if not n:
        return 0
    histogram._raise_if_not_observable()  # type: ignore[no-untyped-call]
    histogram._sum.inc(total)
    buckets = histogram._buckets
    for i, c in enumerate(counts):
        if c:
            buckets[i].inc(c)
    return n


def child(metric: M, *label_values: str) -> M:
    """`metric.labels(*label_values)`, the child kept after the first call (a metric's children are never
    removed in the bridge)."""
    key = (metric, label_values)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*label_values)
    return found
