"""The soak's data lifecycle (docs/lifecycle.md, "Sessions leaving the mirror"): halfway through the run, with
the workload and the faults going on, `opencode-bridge erase` of the session that ran the subagent turn
(with its subagent sessions) and an `opencode-bridge retention` run with archives, both as an operator runs
them (the CLI, in its own process). The workload keeps prompting the erased session upstream. The proof at
the end: not one row of an erased session in any table (the other sessions' proof, stored == the sync log,
is the soak's own)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bridge.store.db import make_engine
from bridge.store.lifecycle.removal import SESSION_TABLES


class Lifecycle:
    def __init__(self, workdir: Path, database_url: str, upstream: str) -> None:
        self.workdir = workdir
        self.database_url = database_url
        self.upstream = upstream
        self.erased: list[str] = []
        self.report: dict[str, Any] = {}

    async def _cli(self, *argv: str) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
        env.update(BRIDGE_DATABASE_URL=self.database_url, BRIDGE_UPSTREAM_NAME=self.upstream,
                   BRIDGE_STATE_DIR=str(self.workdir / "cli-state"), BRIDGE_LOG_FORMAT="json")
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bridge", *argv, env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"opencode-bridge {argv[0]} exited {proc.returncode}: {err.decode()[-2000:]}")
        last = [line for line in out.decode().splitlines() if line.startswith("{")][-1]
        return dict(json.loads(last))

    async def midway(self, delay_s: float, root: str) -> None:
        await asyncio.sleep(delay_s)  # the schedule of the soak, not a wait for a condition
        erased = await self._cli("erase", "--session", root, "--reason", "soak: erased mid-run")
        self.erased = list(erased["sessions"])
        self.report["erase"] = {k: erased[k] for k in ("session_id", "sessions", "rows")}
        self.report["retention"] = (await self._cli("retention", "--days", "1", "--archive-to",
                                                    str(self.workdir / "archive")))["retention"]

    async def leftovers(self) -> dict[str, int]:
        """Rows of the erased sessions, per table: all zero, or the soak fails."""
        if not self.erased:
            return {}
        engine = make_engine(self.database_url, pool_size=1)
        out = {}
        try:
            async with engine.connect() as conn:
                for table, where in SESSION_TABLES.items():
                    q = text(f"SELECT count(*) FROM {table} WHERE upstream = :u AND {where}")
                    out[table] = int((await conn.execute(q, {"u": self.upstream, "ids": self.erased})).scalar_one())
        finally:
            await engine.dispose()
        return out

    def kept(self, sessions: Sequence[str]) -> list[str]:
        return [s for s in sessions if s not in self.erased]
