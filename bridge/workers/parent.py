"""The parent of `BRIDGE_WORKERS` processes (docs/operations.md "Workers").

It is the process systemd sees: it binds the HTTP port once (every worker accepts on the inherited socket),
reads the serve's `/global/event` once and hands it to the workers (bridge.workers.live_tee), and starts N
workers, each an ordinary `opencode-bridge run` with an owner id of its own: the leases spread the sessions
over them (docs/lifecycle.md) and any of them serves any subscriber from the database.

Each worker speaks the systemd notify protocol to a socket of its parent (its own `NOTIFY_SOCKET`), so the
parent knows when it is ready and that its loop still runs: `READY=1` goes to systemd once every worker said it,
`WATCHDOG=1` while the parent's loop runs (a worker that stops feeding its watchdog is killed and started again,
as systemd would do to a single process), `STATUS=` sums the workers' lines. A worker that dies is started again
(capped backoff); its sessions are adopted by the others or its successor. SIGTERM stops every worker the way
one process stops (WebSocket 1001, leases handed off) and waits for them. Before the set was first ready, a
worker that fails fails the start, as a single process would.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import sys
import tempfile
import time
from contextlib import AsyncExitStack, suppress
from pathlib import Path

import structlog

from bridge.config import Settings
from bridge.http.server import LISTEN_BACKLOG  # a reconnect storm arrives at once
from bridge.ops.sdnotify import Notifier
from bridge.upstream.client import UpstreamClient
from bridge.workers import child
from bridge.workers.live_tee import LiveTee, serving_tee
from bridge.workers.notify import NotifyInbox
from bridge.workers.policy import RestartPolicy, set_status, wedged
from bridge.workers.set_state import snapshot, write_atomic

# A worker that has not fed its watchdog this long is wedged: the unit's WatchdogSec, as systemd judges one process.
WORKER_WATCHDOG_S = 30.0
# systemd's own variables are the parent's; a worker gets its parent's socket instead.
_SYSTEMD_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID")


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound and listening on every address `host` names, as aiohttp's TCPSite would bind them."""
    out: list[socket.socket] = []
    for family, type_, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                            flags=socket.AI_PASSIVE):
        sock = socket.socket(family, type_, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(LISTEN_BACKLOG)
        sock.set_inheritable(True)
        out.append(sock)
    return out


class WorkerSet:
    def __init__(self, settings: Settings, database_url: str, *, count: int, runtime_dir: Path,
                 metrics_dir: Path) -> None:
        self.settings = settings
        self.database_url = database_url
        self.count = count
        self.runtime_dir = runtime_dir
        self.metrics_dir = metrics_dir
        self.notifier = Notifier.from_env()
        usec = self.notifier.watchdog_usec
        self.worker_watchdog_s = usec / 1e6 if usec else WORKER_WATCHDOG_S
        self.inbox = NotifyInbox(runtime_dir, count)
        self.state_path = runtime_dir / "set.json"  # the set's state, read by every worker (set_state.py)
        self.tick_s = self.notifier.watchdog_interval_s or 5.0
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.restarts = 0
        self.slot_restarts: dict[int, int] = {}
        self._stopping = asyncio.Event()
        self._all_ready = asyncio.Event()
        self._failed_start: int | None = None
        self._log = structlog.get_logger("bridge.workers")
        self._local_secret = secrets.token_urlsafe(48)  # BRIDGE_AUTH_DISABLED=true: one for all the workers

    def request_stop(self) -> None:
        self._stopping.set()

    def _env(self, index: int, fds: list[int]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SYSTEMD_ENV}
        env.update({
            "BRIDGE_WORKERS": "1", "BRIDGE_DATABASE_URL": self.database_url,
            child.INDEX_ENV: str(index), child.COUNT_ENV: str(self.count),
            child.LISTEN_FDS_ENV: ",".join(map(str, fds)),
            child.LIVE_SOCKET_ENV: str(self.runtime_dir / "live.sock"), child.PARENT_PID_ENV: str(os.getpid()),
            "NOTIFY_SOCKET": str(self.inbox.path(index)), "WATCHDOG_USEC": str(int(self.worker_watchdog_s * 1e6)),
            "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir), child.SET_STATE_ENV: str(self.state_path),
        })
        if self.settings.auth_disabled:
            env[child.LOCAL_SECRET_ENV] = self._local_secret
        return env

    async def run(self) -> int:
        s = self.settings
        sockets = listening_sockets(s.http_host, s.http_port)
        fds = [sock.fileno() for sock in sockets]
        tee_client = UpstreamClient(s.upstream_url, s.upstream_username, s.upstream_password.value)
        tee = LiveTee(tee_client, heartbeat_timeout_s=s.live_heartbeat_timeout_s,
                      reconnect_min_s=s.reconnect_min_s, reconnect_max_s=s.reconnect_max_s)
        async with AsyncExitStack() as stack:
            for sock in sockets:
                stack.callback(sock.close)
            await stack.enter_async_context(tee_client)
            await stack.enter_async_context(serving_tee(tee, str(self.runtime_dir / "live.sock")))
            await stack.enter_async_context(self.inbox)
            self._write_state()  # before any worker starts: a worker finds it at its first probe
            self._log.info("workers_starting", workers=self.count, port=s.http_port)
            async with asyncio.TaskGroup() as tg:
                slots = [tg.create_task(self._slot(i, fds), name=f"worker-{i}") for i in range(self.count)]
                watch = tg.create_task(self._watch(), name="workers-watch")
                await self._stopping.wait()
                for sock in sockets:  # the workers' copies close as they drain: then a connect is refused
                    sock.close()      # at once (the client retries the next process) instead of queuing unserved
                self._write_state()  # every worker answers 503 at once, whichever stops first
                self.notifier.stopping("stopping workers")
                self._log.info("workers_stopping")
                await asyncio.gather(*slots)
                watch.cancel()
        self.notifier.close()
        self._log.info("workers_stopped", restarts=self.restarts)
        return self._failed_start or 0

    async def _slot(self, index: int, fds: list[int]) -> None:
        """One worker, started again whenever it dies, until the set stops."""
        policy = RestartPolicy()
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            started = loop.time()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bridge", "run", env=self._env(index, fds), pass_fds=fds)
            self.procs[index] = proc
            self.inbox.started(index, proc.pid, loop.time())
            self._log.info("worker_started", worker=index, pid=proc.pid)
            rc = await self._wait(proc)
            self.inbox.exited(index)
            self._mark_dead(proc.pid)
            if self._stopping.is_set():
                self._log.info("worker_stopped", worker=index, pid=proc.pid, rc=rc)
                return
            if not self._all_ready.is_set():  # a start that fails is the whole start failing
                self._log.error("worker_failed_to_start", worker=index, pid=proc.pid, rc=rc)
                self._failed_start = rc if rc > 0 else 1  # killed by a signal: 1, as a crash
                self._stopping.set()
                return
            delay = policy.delay_after(loop.time() - started)
            self.restarts += 1
            self.slot_restarts[index] = self.slot_restarts.get(index, 0) + 1
            self._log.error("worker_died", worker=index, pid=proc.pid, rc=rc, restart_in_s=round(delay, 2))
            with suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()

    async def _wait(self, proc: asyncio.subprocess.Process) -> int:
        waiting = asyncio.ensure_future(proc.wait())
        stop = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({waiting, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not waiting.done():
            with suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)  # drains as one process does; systemd's timeout bounds it
        return await waiting

    def _mark_dead(self, pid: int) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, str(self.metrics_dir))  # type: ignore[no-untyped-call]

    async def _watch(self) -> None:
        """READY=1 once all are, WATCHDOG=1 while this loop runs, STATUS= on change; wedged workers killed."""
        interval = self.tick_s
        last_status = ""
        loop = asyncio.get_running_loop()
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that meets its inner result.
            with suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self.inbox.changed.wait()
            self.inbox.changed.clear()
            now = loop.time()
            if not self._all_ready.is_set() and all(self.inbox.ready.get(i) for i in range(self.count)):
                self._all_ready.set()
                self.notifier.ready(set_status(self.count, self.inbox.status, self.inbox.ready))
                self._log.info("workers_ready", workers=self.count)
            for i, proc in list(self.procs.items()):
                if proc.returncode is None and wedged(now, self.inbox.last_ping.get(i, now), bool(
                        self.inbox.ready.get(i)), self.worker_watchdog_s):
                    self._log.error("worker_wedged", worker=i, pid=proc.pid, silent_s=self.worker_watchdog_s)
                    with suppress(ProcessLookupError):
                        proc.kill()
            if self._all_ready.is_set() and not self._stopping.is_set():  # as one process: between READY and STOPPING
                self.notifier.watchdog()
            self._write_state()
            status = set_status(self.count, self.inbox.status, self.inbox.ready)
            if status != last_status and not self._stopping.is_set():  # STOPPING=1 is the last word
                self.notifier.status(status)
                last_status = status


    def _write_state(self) -> None:
        """The set's state for the workers' `/readyz` and `/livez`, at every change and every tick (set_state.py)."""
        pids = {i: p.pid for i, p in self.procs.items() if p.returncode is None}
        state = snapshot(self.count, self.inbox.ready, self.inbox.status, pids, self.slot_restarts,
                         stopping=self._stopping.is_set(), tick_s=self.tick_s, now=time.time())
        try:
            write_atomic(self.state_path, state)
        except OSError as e:  # the workers then answer 503 (stale): visible, and the next tick tries again
            self._log.error("worker_set_state_unwritten", error=str(e))


def metrics_dir_for(settings: Settings) -> Path:
    return settings.state_dir.resolve() / "metrics"


def prepare_metrics_dir(path: Path) -> None:
    """Empty (the files of a previous run's workers would add to this run's counters) and private."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for stale in path.glob("*.db"):
        stale.unlink()


def runtime_dir() -> Path:
    """A private directory for the workers' notify sockets and the tee (short: unix socket paths are bounded),
    removed when the parent ends; under systemd in `RuntimeDirectory=`, which systemd empties at every stop (a
    SIGKILLed parent's too)."""
    base = os.environ.get("RUNTIME_DIRECTORY") or None
    return Path(tempfile.mkdtemp(prefix="obw-", dir=base))
