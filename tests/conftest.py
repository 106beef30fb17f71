"""Shared fixtures: one PostgreSQL server per test run, a fresh migrated database per test.

- `pg_server_url` (session): BRIDGE_DATABASE_URL if set (its role needs CREATEDB), else an embedded
  PostgreSQL started in a short temporary dir (/tmp/bridge-pg-*), stopped and removed at the end.
- `database_url` (function): a new database `test_<hex>` at the migration head, as a `postgresql://` URL;
  dropped afterwards. Cloned from a template migrated once per run, so it costs ~60 ms.
- `empty_database_url` (function): a new database without any table (migration tests).
- `engine` (function, async): an AsyncEngine on `database_url`, disposed afterwards.
- `store` (function): the EventStore of the test module's upstream (its `UPSTREAM`, else "it-upstream").
- `fake` / `fake_client` (function): the scriptable fake upstream on a real socket, and the real client on it.
- `nodes` (function): `await nodes(**Node kwargs)` → a started in-process fan-out node (tests/support/
  fanout_node.py) on `engine`; `own_pool=True` gives the node its own engine, like another process.
- `clients` (function): a list to append WebSocket clients to; every one is closed afterwards.

The database fixtures are synchronous (their async work runs on a private thread) so that sync tests
(e2e drivers) can use them as well as async ones.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import pytest
import pytest_asyncio
import structlog
from sqlalchemy import pool, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bridge.store.db import make_engine, migrate_database, to_async_url
from bridge.store.embedded import start_embedded
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node

T = TypeVar("T")
DEFAULT_UPSTREAM = "it-upstream"

# Components run in-process log through structlog's default configuration. Its console renderer prints a
# logged exception as a `rich` traceback with every frame's locals when `rich` is installed (import-linter
# brings it): seconds of CPU per crash on a loaded machine, time the code under test does not get. Plain
# tracebacks, as bridge.log has them.
_console = structlog.get_config()["processors"][-1]
if isinstance(_console, structlog.dev.ConsoleRenderer):
    _console.exception_formatter = structlog.dev.plain_traceback


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    # A private thread has no event loop: safe whether or not pytest-asyncio's loop is set up.
    with ThreadPoolExecutor(max_workers=1) as pool_:
        return pool_.submit(asyncio.run, coro).result()


def database_url_for(server_url: str, name: str) -> str:
    """The same server and credentials, another database (the `?host=` query is kept verbatim)."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def admin_sql(server_url: str, *statements: str) -> None:
    engine = create_async_engine(to_async_url(server_url), poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    from_env = os.environ.get("BRIDGE_DATABASE_URL")
    if from_env:
        yield from_env
        return
    # Not under pytest's basetemp: every pytest session chmods /tmp/pytest-of-<user> back to 0700, and
    # as root the server runs as the user `embedded_postgres`, which must traverse the parents of its
    # data dir — a concurrent pytest run would lock it out mid-start. Short path as well: the unix
    # socket lives in the data dir (107-byte limit on its path).
    state_dir = Path(tempfile.mkdtemp(prefix="bridge-pg-"))
    server = start_embedded(state_dir)
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def _template_database(pg_server_url: str) -> Iterator[str]:
    name = f"test_template_{uuid.uuid4().hex}"
    run_sync(admin_sql(pg_server_url, f'CREATE DATABASE "{name}"'))
    try:
        run_sync(migrate_database(database_url_for(pg_server_url, name)))
        yield name
    finally:
        run_sync(admin_sql(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _fresh_database(pg_server_url: str, template: str | None) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex}"
    clause = f' TEMPLATE "{template}"' if template else ""
    run_sync(admin_sql(pg_server_url, f'CREATE DATABASE "{name}"{clause}'))
    try:
        yield database_url_for(pg_server_url, name)
    finally:
        run_sync(admin_sql(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def database_url(pg_server_url: str, _template_database: str) -> Iterator[str]:
    yield from _fresh_database(pg_server_url, _template_database)


@pytest.fixture
def empty_database_url(pg_server_url: str) -> Iterator[str]:
    yield from _fresh_database(pg_server_url, None)


@pytest_asyncio.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = make_engine(database_url)
    try:
        yield eng
    finally:
        await eng.dispose()


@pytest.fixture
def store(engine: AsyncEngine, request: pytest.FixtureRequest) -> EventStore:
    return EventStore(engine, getattr(request.module, "UPSTREAM", DEFAULT_UPSTREAM))


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    """A fake `opencode serve` speaking the captures' wire format (fault injection, benchmarks)."""
    f = FakeUpstream()
    await f.start()
    try:
        yield f
    finally:
        await f.stop()


@pytest_asyncio.fixture
async def fake_client(fake: FakeUpstream) -> AsyncIterator[UpstreamClient]:
    """The real upstream client, pointed at `fake`."""
    async with UpstreamClient(fake.url) as c:
        yield c


@pytest_asyncio.fixture
async def nodes(engine: AsyncEngine, database_url: str) -> AsyncIterator[Callable[..., Any]]:
    made: list[Node] = []
    engines: list[AsyncEngine] = []

    async def make(*, own_pool: bool = False, **kw: Any) -> Node:
        eng = engine
        if own_pool:
            eng = make_engine(database_url)
            engines.append(eng)
        n = Node(eng, database_url, **kw)
        made.append(n)
        await n.start()
        return n

    yield make
    for n in made:
        await n.stop()
    for eng in engines:
        await eng.dispose()


@pytest_asyncio.fixture
async def clients() -> AsyncIterator[list[WsClient]]:
    made: list[WsClient] = []
    yield made
    await asyncio.gather(*(c.close() for c in made))
