"""Engine and migrations. The daemon migrates on start (`upgrade_to_head`), serialized across replicas.

Alembic runs programmatically here without `alembic.ini`, so it never touches the app's logging
(`migrations/env.py` only calls `fileConfig` when run from the alembic CLI).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlencode

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def find_migrations_dir(package_dir: Path = _PACKAGE_DIR) -> Path:
    """Where the Alembic scripts are: `bridge/_migrations` in an installed wheel (pyproject.toml maps the
    source tree's `migrations/` there), else `migrations/` next to the package (source tree, editable)."""
    installed = package_dir / "_migrations"
    if (installed / "env.py").is_file():
        return installed
    return package_dir.parent / "migrations"


MIGRATIONS_DIR = find_migrations_dir()

# pg_advisory_xact_lock key: two bridges starting together must not run the same migration twice.
_MIGRATION_LOCK_KEY = 0x0B51D6E0

_SYNC_SCHEMES = ("postgresql", "postgres")
_ASYNC_DRIVER = "postgresql+asyncpg"


def to_async_url(url: str) -> str:
    """`postgresql://` / `postgres://` → `postgresql+asyncpg://`, everything else kept (notably the
    `?host=/socket/dir` query that embedded PostgreSQL uses for its unix socket)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("database URL must look like postgresql://user:password@host/dbname")
    base_scheme = scheme.split("+", 1)[0]
    if base_scheme not in _SYNC_SCHEMES:
        raise ValueError(f"not a PostgreSQL URL (scheme {scheme!r})")
    if "+" in scheme and scheme != _ASYNC_DRIVER:
        raise ValueError(f"unsupported driver {scheme!r}: the bridge uses asyncpg")
    return f"{_ASYNC_DRIVER}://{_hosts_to_query(rest)}"


DEFAULT_PORT = 5432


def _hosts_to_query(rest: str) -> str:
    """libpq's multi-host form `user@h1:p1,h2:p2/db?…` → `user@/db?host=h1:p1&host=h2:p2&…`, the form
    SQLAlchemy hands to asyncpg as a list of hosts (tried in order; `target_session_attrs=read-write` picks
    the writable one: docs/scaling.md, "Failover"). A single host is left as it is."""
    netloc, _slash, tail = rest.partition("/")
    creds, at, hosts = netloc.rpartition("@")
    if "," not in hosts:
        return rest
    pairs = []
    for h in hosts.split(","):
        if not h:
            raise ValueError("empty host in a multi-host database URL")
        host, colon, port = h.rpartition(":") if not h.endswith("]") else (h, "", "")
        if not colon:
            host, port = h, str(DEFAULT_PORT)
        if not port.isdigit():
            raise ValueError(f"bad port {port!r} in a multi-host database URL")
        pairs.append(("host", f"{host}:{port}"))
    path, _qmark, query = tail.partition("?")
    params = pairs + parse_qsl(query, keep_blank_values=True)
    return f"{creds}{at}/{path}?{urlencode(params, safe=':/[]')}"


def make_engine(url: str, *, pool_size: int = 5, max_overflow: int = 10) -> AsyncEngine:
    # pool_pre_ping: after a PostgreSQL restart the pooled connections are dead; ping before use so a
    # write batch fails only if the database is really gone.
    return create_async_engine(
        make_url(to_async_url(url)),
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_recycle=3600,
        connect_args={"server_settings": {"application_name": "opencode-bridge"}},
    )


READ_ACQUIRE_TIMEOUT_S = 2.0  # waiting for a pooled read connection longer than this: 503, retry
READ_CONNECT_TIMEOUT_S = 5.0


def make_read_engine(url: str, *, pool_size: int = 4, statement_timeout_s: float = 10.0) -> AsyncEngine:
    """The pool of the WebSocket replay and the audit API, apart from the writers' (docs/operations.md,
    "Limits"): small and fixed (no overflow), a connection waited for at most READ_ACQUIRE_TIMEOUT_S, and
    every statement cancelled by PostgreSQL after `statement_timeout_s`. A burst of heavy reads then
    queues here and fails fast; it never holds a connection ingest needs."""
    return create_async_engine(
        make_url(to_async_url(url)),
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=READ_ACQUIRE_TIMEOUT_S,
        pool_recycle=3600,
        connect_args={
            "timeout": READ_CONNECT_TIMEOUT_S,
            "server_settings": {
                "application_name": "opencode-bridge-read",
                "statement_timeout": str(int(statement_timeout_s * 1000)),
                "idle_in_transaction_session_timeout": str(int(statement_timeout_s * 1000)),
                "default_transaction_read_only": "on",
            },
        },
    )


class Engines(NamedTuple):
    """A process's engines (bridge.daemon)."""

    main: AsyncEngine  # writes
    liveness: AsyncEngine  # heartbeats and the watchdog's probe: never behind a burst of writes
    read: AsyncEngine  # replays, the session list, the audit API
    standby: AsyncEngine | None  # BRIDGE_READ_DATABASE_URL: a standby for those reads


@asynccontextmanager
async def process_engines(url: str, read_url: str, *, read_pool_size: int,
                          read_statement_timeout_s: float) -> AsyncIterator[Engines]:
    """The engines, each disposed of in reverse order on the way out (`read_url` empty: no standby)."""
    async with AsyncExitStack() as stack:
        def disposed(engine: AsyncEngine) -> AsyncEngine:
            stack.push_async_callback(engine.dispose)
            return engine

        main = disposed(make_engine(url))
        liveness = disposed(make_engine(url, pool_size=1, max_overflow=1))
        read = disposed(make_read_engine(url, pool_size=read_pool_size, statement_timeout_s=read_statement_timeout_s))
        standby = None if not read_url else disposed(make_read_engine(
            read_url, pool_size=read_pool_size, statement_timeout_s=read_statement_timeout_s))
        yield Engines(main, liveness, read, standby)


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


async def migrate_database(url: str) -> None:
    """Bring the database at `url` to the head revision with an engine of its own (CLI `migrate`, tests)."""
    engine = make_engine(url)
    try:
        await upgrade_to_head(engine)
    finally:
        await engine.dispose()


async def upgrade_to_head(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        await conn.run_sync(_upgrade)


async def downgrade_to(engine: AsyncEngine, revision: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        await conn.run_sync(_downgrade, revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current_revision)


async def schema_is_at_head(engine: AsyncEngine) -> bool:
    return await current_revision(engine) == head_revision()


def _upgrade(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


def _downgrade(connection: Connection, revision: str) -> None:
    command.downgrade(alembic_config(connection), revision)


def _current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def fetch_rows(conn: AsyncConnection, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Prepared SQL text straight to asyncpg (cached per connection by the driver adapter); positional rows."""
    return [tuple(r) for r in await conn.exec_driver_sql(sql, params)]
