"""The processes of a whole-daemon benchmark (`bench.wire`, `bench.churn`): a child process with its log, the
fake serve and the real `opencode-bridge run` started, watched and stopped together, and the database they
run in (the caller's, else an embedded PostgreSQL of the run's own)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import asyncpg  # type: ignore[import-untyped]

from bench import wire_measure as m
from bench.in_database import run_in_database
from bridge.store.db import make_engine, upgrade_to_head

UPSTREAM = "wirebench"
ROOT = Path(__file__).resolve().parents[1]


class Child:
    """A child process with its output in a file, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self._out: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.log = log
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


async def until(what: str, check: Any, timeout_s: float, every_s: float = 0.1) -> float:
    """Poll the async `check()` until true; the wall time (time.time()) at which it was."""
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return time.time()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        await asyncio.sleep(every_s)


async def serve_url(serve: Child, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in serve.log.read_text().splitlines():
            if line.startswith("READY "):
                return line.split()[1]
        if serve.proc.poll() is not None:
            raise RuntimeError(f"bench.wire_serve exited: {serve.log.read_text()[-2000:]}")
        await asyncio.sleep(0.1)
    raise TimeoutError("bench.wire_serve did not start")


class Processes:
    """The fake serve, the daemon once started, and a connection to the database both write to."""

    def __init__(self, work: Path, database_url: str, serve: Child, con: asyncpg.Connection) -> None:
        self.work, self.database_url, self.serve, self.con = work, database_url, serve, con
        self.daemon: Child | None = None

    def start_daemon(self, upstream_url: str, port: int, profile: str | None, **extra: str) -> Child:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
        # One process unless the caller says BRIDGE_WORKERS (docs/operations.md "Workers").
        env.update({"BRIDGE_WORKERS": "1", **extra}, BRIDGE_UPSTREAM_URL=upstream_url,
                   BRIDGE_DATABASE_URL=self.database_url,
                   BRIDGE_HTTP_PORT=str(port), BRIDGE_STATE_DIR=str(self.work / "state"),
                   BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_LOG_FORMAT="json", BRIDGE_LOG_LEVEL="info",
                   BRIDGE_AUTH_DISABLED="true")
        argv = [sys.executable, "-m", "bench.wire_profiled", profile] if profile else [
            str(Path(sys.executable).parent / "opencode-bridge")]
        self.daemon = Child([*argv, "run"], self.work / "bridge.log", env)
        return self.daemon

    async def finish(self, out: dict[str, Any], expected: dict[str, list[list[Any]]]) -> None:
        """Stop the daemon and read its exit, its log's problems and the stored rows against `expected`."""
        assert self.daemon is not None, "finish() after start_daemon()"
        out["daemon_exit"] = self.daemon.stop()
        out["daemon_log_problems"] = m.log_problems(self.daemon.log)
        out["check"] = await m.check_stored(self.database_url, UPSTREAM, expected)


@asynccontextmanager
async def processes(work: Path, database_url: str, serve_argv: list[str]) -> AsyncIterator[Processes]:
    """Migrate (before the daemon: its start is not a migration), start `python -m <serve_argv>`, connect;
    on the way out close the connection and stop the daemon and the serve."""
    engine = make_engine(database_url)
    await upgrade_to_head(engine)
    await engine.dispose()
    serve = Child([sys.executable, "-m", *serve_argv], work / "serve.log")
    procs: Processes | None = None
    try:
        con = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
        procs = Processes(work, database_url, serve, con)
        yield procs
    finally:
        if procs is not None:
            await procs.con.close()
            if procs.daemon is not None:
                procs.daemon.stop()
        serve.stop()


def measured(prefix: str, measure: Callable[[Path, str], Coroutine[Any, Any, dict[str, Any]]]
             ) -> tuple[dict[str, Any], Path]:
    """Run `measure(work, database_url)` in BRIDGE_DATABASE_URL (a test's) or else an embedded PostgreSQL in
    a new work directory; its results (with `work_dir`) and that directory. SIGTERM stops the children too."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix=prefix))
    res = run_in_database(lambda url: measure(work, url), work / "pg")
    res["work_dir"] = str(work)
    return res, work
