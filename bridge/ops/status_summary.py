"""The one-line `STATUS=` summary systemd shows: sessions followed, WebSocket clients, commit lag."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry

from bridge import metrics


class StatusSummary:
    """Reads the metrics registry (public sample API); the lag is the mean upstream-to-commit delay of
    the events committed since the previous summary."""

    def __init__(self, sessions: Callable[[], int], registry: CollectorRegistry = metrics.REGISTRY) -> None:
        self._sessions = sessions
        self._registry = registry
        self._sum = self._sample("bridge_upstream_to_commit_seconds_sum")
        self._count = self._sample("bridge_upstream_to_commit_seconds_count")

    def _sample(self, name: str) -> float:
        return self._registry.get_sample_value(name) or 0.0

    def __call__(self) -> str:
        total, count = self._sample("bridge_upstream_to_commit_seconds_sum"), \
            self._sample("bridge_upstream_to_commit_seconds_count")
        lag = f"{(total - self._sum) / (count - self._count) * 1000:.0f} ms" if count > self._count else "idle"
        self._sum, self._count = total, count
        clients = int(self._sample("bridge_ws_connections"))
        return f"following {self._sessions()} sessions, {clients} clients, commit lag {lag}"
