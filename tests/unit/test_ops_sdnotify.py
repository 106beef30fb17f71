"""sd_notify datagrams reach $NOTIFY_SOCKET (path and abstract), and nothing happens without it."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.ops.sdnotify import Notifier


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()


def test_ready_watchdog_status_stopping_arrive_as_key_value_datagrams(receiver: tuple[str, socket.socket]) -> None:
    path, sock = receiver
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert n.ready("following 0 sessions")
    assert n.watchdog()
    assert n.status("a\nmulti   line")
    assert n.stopping()
    got = [sock.recv(4096).decode().split("\n") for _ in range(4)]
    assert got[0] == ["READY=1", "STATUS=following 0 sessions", f"MAINPID={os.getpid()}"]
    assert got[1] == ["WATCHDOG=1"]
    assert got[2] == ["STATUS=a multi line"]
    assert got[3] == ["STOPPING=1", "STATUS=stopping"]
    n.close()


def test_abstract_socket_addresses_start_with_at() -> None:
    name = f"bridge-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(5)
    try:
        assert Notifier(f"@{name}").watchdog()
        assert sock.recv(100) == b"WATCHDOG=1"
    finally:
        sock.close()


def test_without_notify_socket_every_call_is_a_silent_no_op() -> None:
    n = Notifier.from_env({})
    assert not n.enabled
    assert not n.ready() and not n.watchdog() and not n.stopping()
    assert n.watchdog_interval_s is None


def test_a_vanished_socket_does_not_raise(tmp_path: Path) -> None:
    assert not Notifier(str(tmp_path / "gone.sock")).watchdog()


def test_a_receiver_that_stopped_reading_never_blocks_the_sender(receiver: tuple[str, socket.socket]) -> None:
    path, _ = receiver
    n = Notifier(path)
    results = [n.status("x" * 150) for _ in range(5000)]  # far more than the receive queue holds
    assert results[0] and not results[-1]


def test_watchdog_interval_is_half_of_watchdog_usec_and_only_for_our_pid() -> None:
    assert Notifier.from_env({"WATCHDOG_USEC": "30000000"}).watchdog_interval_s == 15.0
    assert Notifier.from_env({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}).watchdog_usec
    assert Notifier.from_env({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}).watchdog_usec is None
    assert Notifier.from_env({"WATCHDOG_USEC": "0"}).watchdog_usec is None
