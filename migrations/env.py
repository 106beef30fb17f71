"""Alembic environment, for two callers:

- the alembic CLI (`alembic upgrade head`): URL from `-x url=…` or BRIDGE_DATABASE_URL; runs on asyncpg
  (the only driver the bridge installs); logging configured from alembic.ini;
- the daemon and tests (`bridge.store.db`): a live connection in `config.attributes["connection"]`,
  inside the caller's transaction; the app's logging is left alone.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, pool
from sqlalchemy.ext.asyncio import create_async_engine

from bridge.store.db import to_async_url
from bridge.store.partition_names import include_name
from bridge.store.schema import metadata

config = context.config
target_metadata = metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("BRIDGE_DATABASE_URL")
    if not url:
        raise SystemExit("no database URL: pass -x url=postgresql://… or set BRIDGE_DATABASE_URL")
    return to_async_url(url)


def _configure(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, include_name=include_name)


def _run_on(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_cli_online() -> None:
    engine = create_async_engine(_url(), poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run_on)
            await conn.commit()
    finally:
        await engine.dispose()


def _run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run_on(connection)
else:
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    if context.is_offline_mode():
        _run_offline()
    else:
        asyncio.run(_run_cli_online())
