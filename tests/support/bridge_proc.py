"""Runs the real daemon (`python -m bridge run`) as a child process, so tests can SIGKILL it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO

import aiohttp

from tests.support.waiting import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class BridgeProcess:
    def __init__(self, workdir: Path, upstream_url: str, database_url: str, *, name: str = "bridge",
                 extra_env: dict[str, str] | None = None, start_new_session: bool = False) -> None:
        self.workdir = workdir
        self.upstream_url = upstream_url
        self.database_url = database_url
        self.name = name
        self.extra_env = extra_env or {}
        # In a session of its own, a terminal's Ctrl-C reaches only the parent, which stops it in order.
        self.start_new_session = start_new_session
        self.port = free_port()
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
        env.update(
            BRIDGE_UPSTREAM_URL=self.upstream_url,
            BRIDGE_DATABASE_URL=self.database_url,
            BRIDGE_HTTP_PORT=str(self.port),
            BRIDGE_STATE_DIR=str(self.workdir / f"{self.name}-state"),
            BRIDGE_LOG_FORMAT="json",
            BRIDGE_LOG_LEVEL="debug",
            BRIDGE_RECONNECT_MAX_S="1.0",
            # One process, as before workers; a test about workers says how many.
            **{"BRIDGE_WORKERS": "1", **self.extra_env},
        )
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()/kill()
        self.proc = subprocess.Popen([sys.executable, "-m", "bridge", "run"], env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2],
                                     start_new_session=self.start_new_session)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        async def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"bridge exited with {self.proc.returncode}:\n{self.log_tail()}")
            async with aiohttp.ClientSession() as http, http.get(self.url + "/readyz") as r:
                return r.status == 200

        await wait_until(ready, timeout, 0.1, message=f"{self.name} /readyz", ignore=(aiohttp.ClientError,))

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.wait()

    def wait(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        finally:
            if self._log:
                self._log.close()
                self._log = None
        return rc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


BridgeFactory = Callable[..., BridgeProcess]


@contextlib.asynccontextmanager
async def running_bridge(workdir: Path, upstream_url: str, database_url: str, *, ready_s: float = 60.0,
                         show_log_tail: int = 0, **env: str) -> AsyncIterator[BridgeProcess]:
    """A bridge process (`env` added to its environment) started and ready for the block, stopped after it;
    then, when `show_log_tail`, that many lines of its log printed for whoever reads a failure."""
    bridge = BridgeProcess(workdir, upstream_url, database_url, extra_env=env)
    bridge.start()
    try:
        await bridge.wait_ready(ready_s)
        yield bridge
    finally:
        bridge.stop()
        if show_log_tail:
            print(f"\n--- tail of {bridge.log_path} ---\n{bridge.log_tail(show_log_tail)}")
