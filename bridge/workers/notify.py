"""The parent's end of its workers' notify protocol: one datagram socket per worker (its `NOTIFY_SOCKET`), read
on the event loop; what each worker said last (ready, status line, last watchdog ping). Parsing: policy.py."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import TracebackType

from bridge.workers.policy import parse_notification

_MAX_DATAGRAM = 4096


class NotifyInbox:
    def __init__(self, directory: Path, count: int) -> None:
        self._directory = directory
        self._count = count
        self._socks: list[socket.socket] = []
        self.ready: dict[int, bool] = {}
        self.status: dict[int, str] = {}
        self.last_ping: dict[int, float] = {}
        self.changed = asyncio.Event()

    def path(self, index: int) -> Path:
        return self._directory / f"notify-{index}.sock"

    async def __aenter__(self) -> NotifyInbox:
        loop = asyncio.get_running_loop()
        for i in range(self._count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
            sock.bind(str(self.path(i)))
            self._socks.append(sock)
            loop.add_reader(sock.fileno(), self._read, i, sock)
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._socks:
            loop.remove_reader(sock.fileno())
            sock.close()
        self._socks.clear()

    def started(self, index: int, pid: int, now: float) -> None:
        self.ready[index] = False
        self.status[index] = f"starting (pid {pid})"
        self.last_ping[index] = now
        self.changed.set()

    def exited(self, index: int) -> None:
        self.ready[index] = False
        self.status[index] = "restarting"
        self.changed.set()

    def _read(self, index: int, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                datagram = sock.recv(_MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            fields = parse_notification(datagram)
            if "WATCHDOG" in fields:
                self.last_ping[index] = loop.time()
            if fields.get("READY") == "1":
                self.ready[index] = True
                self.last_ping[index] = loop.time()
                self.changed.set()
            if "STATUS" in fields:
                self.status[index] = fields["STATUS"]
                self.changed.set()
