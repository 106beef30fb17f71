"""The parent's decisions, pure (docs/operations.md "Workers"): what a worker's notification says, when a dead
worker is started again, whether a silent one is wedged, the one `STATUS=` line of the set, and where the
`/global/event` byte stream may be cut so that a worker joining it never starts mid-event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# A worker that ran this long before it died was healthy: the next restart waits only the first delay.
HEALTHY_RUN_S = 60.0
RESTART_MIN_S = 0.5
RESTART_MAX_S = 30.0


def parse_notification(datagram: bytes) -> dict[str, str]:
    """One sd_notify(3) datagram: `KEY=VALUE` lines (a line without `=` is ignored, the last of a key wins)."""
    out: dict[str, str] = {}
    for line in datagram.decode("utf-8", "replace").split("\n"):
        key, sep, value = line.partition("=")
        if sep and key:
            out[key] = value
    return out


@dataclass
class RestartPolicy:
    """Capped doubling between restarts of one worker slot; reset by a run that lasted `HEALTHY_RUN_S`."""

    min_s: float = RESTART_MIN_S
    max_s: float = RESTART_MAX_S
    healthy_run_s: float = HEALTHY_RUN_S
    failures: int = 0

    def delay_after(self, ran_s: float) -> float:
        if ran_s >= self.healthy_run_s:
            self.failures = 0
        delay = min(self.max_s, self.min_s * (2.0 ** self.failures))
        self.failures += 1
        return delay


def wedged(now: float, last_ping: float, ready: bool, watchdog_s: float) -> bool:
    """A ready worker that has not fed its watchdog for `watchdog_s` is wedged (as systemd would judge it)."""
    return ready and now - last_ping > watchdog_s


def set_status(expected: int, statuses: Mapping[int, str], ready: Mapping[int, bool]) -> str:
    """`workers 2/2 ready · w0: following 3 sessions, … · w1: …` (trimmed to one line by the notifier)."""
    up = sum(1 for i in range(expected) if ready.get(i))
    parts = [f"workers {up}/{expected} ready"]
    parts.extend(f"w{i}: {statuses[i]}" for i in sorted(statuses) if statuses[i])
    return " · ".join(parts)


class EventCutter:
    """Cuts an SSE byte stream after its last complete event (a blank line: `\\n\\n` or `\\r\\n\\r\\n`), so
    what is handed on is whole events only; the rest waits for the next chunk. Nothing is parsed."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._rest + chunk if self._rest else chunk
        end = _last_boundary(data)
        self._rest = data[end:]
        return data[:end]

    @property
    def pending(self) -> int:
        return len(self._rest)


def first_event(stream: bytes) -> tuple[bytes, bytes]:
    """Split whole events into (the first one, the rest): the stream's opening `server.connected`, kept for
    workers that join later."""
    cut = min((i + len(sep) for sep in _BOUNDARIES if (i := stream.find(sep)) >= 0), default=0)
    return stream[:cut], stream[cut:]


# A lone `\r` line end is left out: a cut after `\r\r` could split a `\r\n`. Not cutting only delays bytes.
_BOUNDARIES = (b"\n\n", b"\r\n\r\n")


def _last_boundary(data: bytes) -> int:
    """The index just after the last blank line in `data` (0: none)."""
    return max((i + len(sep) for sep in _BOUNDARIES if (i := data.rfind(sep)) >= 0), default=0)
