"""The migrated schema is the schema the code declares; migrations run from the daemon and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.db import (
    current_revision,
    downgrade_to,
    head_revision,
    make_engine,
    schema_is_at_head,
    upgrade_to_head,
)
from bridge.store.partition_names import include_name
from bridge.store.schema import metadata

REPO = Path(__file__).resolve().parents[2]


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": True, "include_name": include_name}
    )
    return list(compare_metadata(context, metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_upgrade_of_an_empty_database_matches_the_declared_schema(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    try:
        assert await current_revision(engine) is None
        assert not await schema_is_at_head(engine)

        await upgrade_to_head(engine)

        assert await current_revision(engine) == head_revision()
        assert await schema_is_at_head(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
            assert await conn.run_sync(_tables) >= {t.name for t in metadata.sorted_tables}
    finally:
        await engine.dispose()


async def test_upgrade_twice_is_a_no_op(engine: AsyncEngine) -> None:
    await upgrade_to_head(engine)
    assert await schema_is_at_head(engine)


async def test_downgrade_to_base_removes_every_table_and_upgrade_restores_them(engine: AsyncEngine) -> None:
    await downgrade_to(engine, "base")
    assert await current_revision(engine) is None
    async with engine.connect() as conn:
        assert await conn.run_sync(_tables) == {"alembic_version"}

    await upgrade_to_head(engine)
    async with engine.connect() as conn:
        assert await conn.run_sync(_diff) == []


def test_alembic_cli_upgrades_with_the_url_from_x_argument(empty_database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BRIDGE_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={empty_database_url}", "upgrade", "head"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    cur = subprocess.run(
        [sys.executable, "-m", "alembic", "current"],
        cwd=REPO,
        env={**env, "BRIDGE_DATABASE_URL": empty_database_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cur.returncode == 0, cur.stderr
    assert f"{head_revision()} (head)" in cur.stdout
