"""Engine URLs and the embedded server: the socket URL embedded PostgreSQL hands out must work."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bridge.store.db import make_engine, to_async_url
from bridge.store.embedded import start_embedded


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@db:5432/bridge", "postgresql+asyncpg://u:p@db:5432/bridge"),
        ("postgres://u@db/bridge?sslmode=require", "postgresql+asyncpg://u@db/bridge?sslmode=require"),
        ("postgresql://postgres:@/bridge?host=/tmp/s", "postgresql+asyncpg://postgres:@/bridge?host=/tmp/s"),
        ("postgresql+asyncpg://u@db/bridge", "postgresql+asyncpg://u@db/bridge"),
    ],
)
def test_to_async_url_switches_the_driver_and_keeps_the_rest(url: str, expected: str) -> None:
    assert to_async_url(url) == expected


@pytest.mark.parametrize("url", ["mysql://u@db/x", "postgresql+psycopg2://u@db/x", "not a url"])
def test_to_async_url_refuses_what_is_not_postgresql(url: str) -> None:
    with pytest.raises(ValueError):
        to_async_url(url)


async def test_engine_connects_with_the_url_as_given(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            name = (await conn.execute(text("SELECT current_database()"))).scalar_one()
    finally:
        await engine.dispose()

    assert database_url.rstrip("/").split("?")[0].endswith(f"/{name}")


@pytest.fixture
def state_dir() -> Iterator[Path]:
    # Outside pytest's basetemp, for the reason given in tests/conftest.py (pg_server_url).
    path = Path(tempfile.mkdtemp(prefix="bridge-pg-t-"))
    try:
        yield path / "state"
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def test_start_embedded_creates_the_bridge_database_and_restarts_on_the_same_data(
    state_dir: Path,
) -> None:
    # Synchronous and slow-ish: the daemon calls it from a thread, as here.
    first = await asyncio.to_thread(start_embedded, state_dir)
    try:
        assert first.url.startswith("postgresql://") and "/bridge?host=" in first.url
    finally:
        await asyncio.to_thread(first.stop)
    first.stop()  # idempotent

    again = await asyncio.to_thread(start_embedded, state_dir)
    try:
        assert again.url == first.url
        engine = make_engine(again.url)
        try:
            async with engine.connect() as conn:
                database = (await conn.execute(text("SELECT current_database()"))).scalar_one()
                server_addr = (await conn.execute(text("SELECT inet_server_addr()"))).scalar_one()
        finally:
            await engine.dispose()
        assert database == "bridge"
        assert server_addr is None  # NULL: connected over the unix socket named by ?host=
    finally:
        await asyncio.to_thread(again.stop)
