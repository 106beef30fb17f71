"""The systemd notification protocol (sd_notify(3)), without a dependency.

A notification is one datagram of `KEY=VALUE` lines sent to the unix socket named by `$NOTIFY_SOCKET`;
a leading `@` names an abstract socket. Without `$NOTIFY_SOCKET` (not under systemd, or `Type=simple`)
every call is a no-op, so the daemon never needs to know how it was started.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


def _address(raw: str) -> str | bytes:
    # Abstract namespace: '@name' on the wire is '\0name'.
    return b"\0" + raw[1:].encode() if raw.startswith("@") else raw


class Notifier:
    def __init__(self, notify_socket: str | None, watchdog_usec: int | None = None) -> None:
        self._address = _address(notify_socket) if notify_socket else None
        self.watchdog_usec = watchdog_usec
        self._sock: socket.socket | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if env is None else env
        usec: int | None = None
        raw_usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        # WATCHDOG_PID names the process the watchdog is meant for; a child inheriting it must not ping.
        if raw_usec.isdigit() and int(raw_usec) > 0 and (not pid or pid == str(os.getpid())):
            usec = int(raw_usec)
        return cls(env.get("NOTIFY_SOCKET") or None, usec)

    @property
    def enabled(self) -> bool:
        return self._address is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        """How often to ping: half the configured WatchdogSec, as sd_watchdog_enabled(3) advises."""
        return None if self.watchdog_usec is None else self.watchdog_usec / 2_000_000

    def send(self, *fields: str) -> bool:
        """Send one notification; False if there is no socket or the send failed (never raises)."""
        if self._address is None:
            return False
        try:
            if self._sock is None:
                # Non-blocking: a receiver that stopped reading must never stall the event loop;
                # a notification that does not fit is dropped (the next tick sends another).
                self._sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
                )
            self._sock.sendto("\n".join(fields).encode(), self._address)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []), f"MAINPID={os.getpid()}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, line: str) -> bool:
        return self.send(f"STATUS={_one_line(line)}")

    def stopping(self, status: str = "stopping") -> bool:
        return self.send("STOPPING=1", f"STATUS={_one_line(status)}")

    def reloading(self) -> bool:
        return self.send("RELOADING=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
