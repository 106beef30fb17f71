"""What a worker process gets from its parent (docs/operations.md "Workers"), read from its environment: the
inherited listening sockets, the parent's `/global/event` tee, and the parent's pid (a worker whose parent is
gone stops: `PR_SET_PDEATHSIG`)."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

from bridge.upstream.client import UpstreamClient
from bridge.upstream.transport import AiohttpTransport
from bridge.workers.set_state import SetView

INDEX_ENV = "BRIDGE_WORKER_INDEX"
COUNT_ENV = "BRIDGE_WORKER_COUNT"
LISTEN_FDS_ENV = "BRIDGE_WORKER_LISTEN_FDS"
LIVE_SOCKET_ENV = "BRIDGE_WORKER_LIVE_SOCKET"
PARENT_PID_ENV = "BRIDGE_WORKER_PARENT_PID"
# The set's state file the parent keeps (bridge.workers.set_state): every worker answers /readyz for the set.
SET_STATE_ENV = "BRIDGE_WORKER_SET_STATE"
# BRIDGE_AUTH_DISABLED=true: the per-start secret is the parent's, so a token works on every worker.
LOCAL_SECRET_ENV = "BRIDGE_WORKER_LOCAL_SECRET"
# The host part of the tee's URL: requests go to the unix socket, whatever it says.
TEE_BASE_URL = "http://bridge-workers-parent"
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerContext:
    index: int
    listen_fds: tuple[int, ...]
    live_socket: str
    parent_pid: int
    local_secret: str = ""
    count: int = 1  # the host's workers (each session's home worker: bridge.lease.claim_delay)
    set_state: str = ""  # the parent's file of the set's state

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WorkerContext | None:
        env = os.environ if env is None else env
        if INDEX_ENV not in env:
            return None
        fds = tuple(int(fd) for fd in env.get(LISTEN_FDS_ENV, "").split(",") if fd)
        return cls(int(env[INDEX_ENV]), fds, env.get(LIVE_SOCKET_ENV, ""), int(env.get(PARENT_PID_ENV, "0")),
                   env.get(LOCAL_SECRET_ENV, ""), int(env.get(COUNT_ENV, "1")), env.get(SET_STATE_ENV, ""))

    def sockets(self) -> list[socket.socket]:
        """The parent's listening sockets (bound once, before any worker started: every worker accepts on them)."""
        return [socket.socket(fileno=fd) for fd in self.listen_fds]

    def set_view(self) -> SetView | None:
        """What this worker answers for its whole set at `/readyz` and `/livez` (None: no parent's file)."""
        return SetView(Path(self.set_state), self.index) if self.set_state else None

    def live_client(self) -> AbstractAsyncContextManager[UpstreamClient]:
        """A client whose `/global/event` is the parent's tee (the only route a worker asks it for)."""
        return UpstreamClient(TEE_BASE_URL, transport=AiohttpTransport(unix_socket=self.live_socket))

    def die_with_parent(self) -> None:
        """SIGTERM to this worker when its parent dies (Linux); a parent already gone stops it now."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass
        if self.parent_pid and os.getppid() != self.parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)
