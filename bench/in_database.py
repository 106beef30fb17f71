"""Where a benchmark runs: the database BRIDGE_DATABASE_URL names (a test's), else an embedded PostgreSQL
(fsync on) started for the run and stopped after it; and the machine line its results carry."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bridge.store.embedded import start_embedded

Results = dict[str, Any]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def run_in_database(run: Callable[[str], Coroutine[Any, Any, Results]], data: Path | None = None,
                    remove: bool = False) -> Results:
    """`run(database_url)` in BRIDGE_DATABASE_URL or an embedded PostgreSQL in `data` (a new temporary
    directory if None; removed after the run when `remove`); its results with the `machine` line."""
    url = os.environ.get("BRIDGE_DATABASE_URL")
    data = None if url else (data or Path(tempfile.mkdtemp(prefix="bridge-bench-")))
    pg = None if data is None else start_embedded(data)
    try:
        res = asyncio.run(run(url or pg.url))  # type: ignore[union-attr]
    finally:
        if pg is not None:
            pg.stop()
        if data is not None and remove:
            shutil.rmtree(data, ignore_errors=True)
    res["machine"] = machine()
    return res
