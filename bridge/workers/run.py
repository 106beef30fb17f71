"""`opencode-bridge run` with `BRIDGE_WORKERS` > 1: the parent's start, signals and end (parent.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal

import structlog

from bridge.config import Settings
from bridge.metrics import MULTIPROC_DIR_ENV
from bridge.workers.parent import WorkerSet, metrics_dir_for, prepare_metrics_dir, runtime_dir


def run_parent(settings: Settings, database_url: str) -> int:
    metrics_dir = metrics_dir_for(settings)
    prepare_metrics_dir(metrics_dir)
    os.environ[MULTIPROC_DIR_ENV] = str(metrics_dir)
    private = runtime_dir()
    try:
        return asyncio.run(_serve(WorkerSet(settings, database_url, count=settings.workers, runtime_dir=private,
                                            metrics_dir=metrics_dir)))
    finally:
        shutil.rmtree(private, ignore_errors=True)


async def _serve(workers: WorkerSet) -> int:
    loop = asyncio.get_running_loop()
    log = structlog.get_logger("bridge.workers")
    signals = 0

    def on_signal(name: str) -> None:
        nonlocal signals
        signals += 1
        log.info("signal_received", signal=name, workers=len(workers.procs))
        if signals > 1:  # a second signal: every worker killed, the parent gone at once
            for proc in workers.procs.values():
                if proc.returncode is None:
                    proc.kill()
            shutil.rmtree(workers.runtime_dir, ignore_errors=True)
            os._exit(1)
        workers.request_stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    loop.add_signal_handler(signal.SIGHUP, lambda: log.warning("sighup_ignored", hint="restart to reload"))
    return await workers.run()
