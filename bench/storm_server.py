"""The fan-out side of `bench.storm`, in its own process: hub, feed, LISTEN connection, the shared reads and
`/v1/ws` (bridge.fanout), with the daemon's read pool (4 connections, 2 s acquire timeout) and its GC
tuning, against the bench's PostgreSQL; `/metrics` for the orchestrator. Prints `{"port": N}` when ready
and serves until SIGTERM, then `{"cpu_s": X}` (its own CPU and its workers', shutdown included: a
deploy's old process, bench.storm_deploy); `--port` binds that port (a deploy's new process). With
`--workers N` (docs/operations.md "Workers"): this process binds the port and
starts N such servers that accept on it, each with its own read pool, their metrics summed
(PROMETHEUS_MULTIPROC_DIR), as `opencode-bridge run` with BRIDGE_WORKERS=N serves its clients."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import errno
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from aiohttp import web

from bridge.fanout.connection import WebSocketContext
from bridge.fanout.feed import CommitListener, DurableFeed
from bridge.fanout.hub import Hub
from bridge.fanout.limits import ConnectionSlots
from bridge.http.server import LISTEN_BACKLOG, make_runner
from bridge.http.ws import add_websocket
from bridge.log import configure_logging
from bridge.metrics import exposition
from bridge.perf.runtime import tune_gc
from bridge.store.db import make_engine, make_read_engine
from bridge.store.reads import FanoutStore

SECRET = "storm-bench-secret-" + "x" * 32
UPSTREAM = "storm-bench"


async def _metrics(_request: web.Request) -> web.Response:
    return web.Response(body=exposition(), content_type="text/plain")


async def serve(url: str, read_pool: int, max_clients: int, listen_fd: int | None = None, port: int = 0) -> None:
    tune_gc()
    engine = make_engine(url)
    read_engine = make_read_engine(url, pool_size=read_pool)
    hub = Hub(wake=lambda sid: feed.wake(sid))
    store = FanoutStore(engine, UPSTREAM, read_engine)
    feed = DurableFeed(hub, store)
    listener = CommitListener(url, UPSTREAM, feed.committed, feed.wake_all, on_status=feed.status)
    service = WebSocketContext(hub=hub, store=store, upstream=UPSTREAM, secret=SECRET,
                            slots=ConnectionSlots(per_token=32, per_address=max_clients, total=max_clients),
                            read_slots=max(1, read_pool - 1))  # as bridge.fanout.service.FanoutPart sets it
    app = web.Application()
    add_websocket(app, service)
    app.router.add_get("/metrics", _metrics)
    marks: dict[str, float] = {}

    async def told(_app: web.Application) -> None:  # after every socket was told 1001 (add_websocket's hook)
        marks["told"] = time.time()

    app.on_shutdown.append(told)
    # The daemon's runner (bridge.http.server): a handler whose client went away is cancelled.
    runner = make_runner(app, max_connections=max_clients + 100)
    await runner.setup()
    site = web.SockSite(runner, socket.socket(fileno=listen_fd) if listen_fd is not None else _bind(port),
                        backlog=LISTEN_BACKLOG)  # as the daemon's (aiohttp's default, 128, drops a storm's SYNs)
    await site.start()
    tasks = [asyncio.create_task(feed.run()), asyncio.create_task(listener.run())]
    await listener.connected.wait()
    port = runner.addresses[0][1]
    print(json.dumps({"port": port}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    t0 = time.time()
    for t in tasks:
        t.cancel()
    await runner.cleanup()
    t1 = time.time()
    await read_engine.dispose()
    await engine.dispose()
    # How the shutdown went (bench.storm_deploy reads nothing of it: for whoever looks at stderr).
    print(json.dumps({"shutdown_1001_s": round(marks.get("told", t0) - t0, 2), "shutdown_http_s": round(t1 - t0, 2),
                      "shutdown_s": round(time.time() - t0, 2), "at": round(time.time(), 2)}),
          file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--read-pool", type=int, default=4)
    ap.add_argument("--max-clients", type=int, default=20_000)
    ap.add_argument("--profile", help="write cProfile stats of the whole run here (slows the server down)")
    ap.add_argument("--workers", type=int, default=1, help="server processes accepting on one port")
    ap.add_argument("--port", type=int, default=0, help="the port to bind (0: any free one)")
    ap.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # a worker's inherited socket
    a = ap.parse_args()
    if a.workers > 1:
        sys.exit(_parent(a))
    configure_logging("console", "warning")
    prof = cProfile.Profile() if a.profile else None
    if prof is not None:
        prof.enable()
    asyncio.run(serve(a.database_url, a.read_pool, a.max_clients, a.listen_fd, a.port))
    if prof is not None:
        prof.disable()
        prof.dump_stats(a.profile if not os.path.exists(a.profile) else f"{a.profile}.{os.getpid()}")  # a deploy's new
    if a.listen_fd is None:
        print(json.dumps({"cpu_s": _cpu_s()}), flush=True)
        print(json.dumps({"loop_closed_at": round(time.time(), 2)}), file=sys.stderr, flush=True)
    sys.exit(0)


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its waited-for workers."""
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime, 2)


def _bind(port: int, wait_s: float = 60.0) -> socket.socket:
    """The listening socket; a port still held by the process a deploy replaces is tried again until free."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return socket.create_server(("127.0.0.1", port), backlog=LISTEN_BACKLOG)
        except OSError as e:
            if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _parent(a: argparse.Namespace) -> int:
    """Binds the port, starts the workers on it, says `{"port": N}` once each is ready; at SIGTERM closes
    its copy of the socket (the port is free once every worker stopped accepting) and forwards it."""
    sock = _bind(a.port)
    sock.set_inheritable(True)
    metrics_dir = tempfile.mkdtemp(prefix="storm-metrics-")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
    argv = [sys.executable, "-m", "bench.storm_server", "--database-url", a.database_url, "--read-pool",
            str(a.read_pool), "--max-clients", str(a.max_clients), "--listen-fd", str(sock.fileno())]
    workers = [subprocess.Popen([*argv, *(["--profile", f"{a.profile}.{i}"] if a.profile else [])], env=env,
                                pass_fds=[sock.fileno()], stdout=subprocess.PIPE) for i in range(a.workers)]
    for w in workers:
        assert w.stdout is not None
        json.loads(w.stdout.readline())
    # Blocked after the workers started (they must not inherit the mask), before the orchestrator may send it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    print(json.dumps({"port": sock.getsockname()[1], "workers": [w.pid for w in workers]}), flush=True)
    signal.sigwait({signal.SIGTERM})
    sock.close()  # else connections queue on it, accepted by nobody, until the workers have exited
    for w in workers:
        w.terminate()
    rc = max(w.wait() for w in workers)
    shutil.rmtree(metrics_dir, ignore_errors=True)
    print(json.dumps({"cpu_s": _cpu_s()}), flush=True)
    return rc


if __name__ == "__main__":
    main()
