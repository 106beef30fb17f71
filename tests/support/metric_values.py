"""Metrics read the way an operator reads them (bridge.metrics.REGISTRY): tests observe the daemon through
these rather than through counters kept on its objects for them."""

from __future__ import annotations

from bridge import metrics


def sample(name: str, **labels: str) -> float:
    """The current value of one sample (0 when it was never set)."""
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


class Since:
    """How much one sample grew since this was made (counters are process-wide; tests read deltas)."""

    def __init__(self, name: str, **labels: str) -> None:
        self._name, self._labels = name, labels
        self._start = sample(name, **labels)

    @property
    def value(self) -> float:
        return sample(self._name, **self._labels) - self._start
