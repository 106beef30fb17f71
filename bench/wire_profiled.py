"""`opencode-bridge run` under cProfile, one profile per phase, for `bench.wire --profile BASE`.

Each SIGUSR2 writes what was profiled since the previous one to `BASE.<n>` (n = 0, 1, …) and starts afresh;
the end of the process writes the rest to `BASE.<n>` too. The handler runs in the main thread, between two
bytecodes of the event loop, so the profile it stops is the one that runs the daemon. Read a phase with
`python -m pstats BASE.0` (sort tottime / cumulative).

Usage: python -m bench.wire_profiled BASE run
"""

from __future__ import annotations

import cProfile
import signal
import sys
from types import FrameType


def main() -> int:
    base, argv = sys.argv[1], sys.argv[2:]
    prof = cProfile.Profile()
    dumped = [0]

    def dump(*_: object) -> None:
        prof.disable()
        prof.dump_stats(f"{base}.{dumped[0]}")
        dumped[0] += 1
        prof.clear()
        prof.enable()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        dump()

    signal.signal(signal.SIGUSR2, on_signal)
    from bridge.cli import main as bridge_main

    prof.enable()
    try:
        return bridge_main(argv)
    finally:
        prof.disable()
        prof.dump_stats(f"{base}.{dumped[0]}")


if __name__ == "__main__":
    raise SystemExit(main())
