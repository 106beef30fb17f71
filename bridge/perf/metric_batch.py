"""Metric updates once per batch, not once per event (docs/operations.md, "Metrics per batch").

- `observe_many(histogram, values)`: a batch's values into a histogram with one update per bucket touched and
  one of the sum: the same `_bucket`, `_count` and `_sum` series as one `observe` per value (it reads the
  histogram's bounds and values, prometheus_client's own fields: tests/unit/test_metric_batch.py compares the
  two on every release the project pins).
- `child(metric, *label_values)`: a labelled metric's child, looked up once per label values: `labels()` checks
  and converts its arguments and takes the metric's lock on every call, a cost per event on a hot path.
- `TALLY`: what many small batches of one loop turn add up to (a burst stores a batch of one or two events per
  session), kept in plain dicts and written once at the end of the turn (`loop.call_soon`): one locked
  update per counter child and per bucket touched in a turn, whatever the number of batches. Outside a
  running loop it writes at once. A scrape sees a turn's values when the turn is over.
None changes a metric's name, labels or meaning.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any, TypeVar

from prometheus_client import Counter, Histogram
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


class Tally:
    """Counter increments and histogram observations of one loop turn, written to the metrics at its end."""

    def __init__(self) -> None:
        self._counts: dict[tuple[Counter, tuple[str, ...]], float] = {}
        self._observed: dict[Histogram, list[float]] = {}
        self._due: asyncio.AbstractEventLoop | None = None  # the loop whose turn writes them

    def count(self, counter: Counter, label_values: tuple[str, ...], amount: float = 1.0) -> None:
        """`counter.labels(*label_values).inc(amount)` (no labels: `()`), at the end of the turn."""
        key = (counter, label_values)
        self._counts[key] = self._counts.get(key, 0.0) + amount
        if self._due is None or self._due.is_closed():
            self._soon()

    def observe(self, histogram: Histogram, values: Iterable[float]) -> None:
        """`histogram.observe(v)` for each value, at the end of the turn."""
        got = self._observed.get(histogram)
        if got is None:
            got = self._observed[histogram] = []
        got.extend(values)
        if self._due is None or self._due.is_closed():
            self._soon()

    def observe_one(self, histogram: Histogram, value: float) -> None:
        """`histogram.observe(value)`, at the end of the turn."""
        got = self._observed.get(histogram)
        if got is None:
            got = self._observed[histogram] = []
        got.append(value)
        if self._due is None or self._due.is_closed():
            self._soon()

    def _soon(self) -> None:
        """The turn's end is to write (a loop that closed before its turn ended, as a test's may, is replaced)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a tool, a test): at once
            self.flush()
            return
        self._due = loop
        loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what the turn gathered."""
        self._due = None
        counts, self._counts = self._counts, {}
        observed, self._observed = self._observed, {}
        for (counter, labels), amount in counts.items():
            (child(counter, *labels) if labels else counter).inc(amount)
        for histogram, values in observed.items():
            observe_many(histogram, values)


TALLY = Tally()  # the process's one (each worker process has its own)
