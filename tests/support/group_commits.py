"""Group commits observed the way an operator sees them: through the `bridge_group_commit_writes`
histogram (one observation per committed transaction, its value the writes it held)."""

from __future__ import annotations

from bridge import metrics


class Groups:
    """Group-commit transactions and the writes they held since it was made, read from
    `bridge_group_commit_writes` (one observation per committed group) as an operator sees them."""

    def __init__(self) -> None:
        self._count0, self._sum0 = self._read()

    @staticmethod
    def _read() -> tuple[float, float]:
        get = metrics.REGISTRY.get_sample_value
        return get("bridge_group_commit_writes_count") or 0.0, get("bridge_group_commit_writes_sum") or 0.0

    @property
    def committed(self) -> float:
        return self._read()[0] - self._count0

    @property
    def writes(self) -> float:
        return self._read()[1] - self._sum0
