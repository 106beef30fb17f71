"""What the mirror costs in PostgreSQL, measured on a database the bridge filled (docs/scaling.md):

    python -m bench.footprint postgresql://…/bridge        # any bridge database; read-only queries

Prints JSON: events and sessions stored, bytes on disk per event (`chat_session_events` with its TOAST and
indexes; the payload alone as `pg_column_size`), events per session (mean, p50, p95, max) and per turn
(a turn = one user message: v2 `session.next.prompt.admitted`… counted by distinct user `message_id` of
the `prompt` kind, legacy `message.updated` of role user), and the whole database's size. `make soak` prints
the same for its database at the end (real serve, scripted model, both runtimes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.db import make_engine

_SIZES = """
SELECT count(*) AS events,
       count(DISTINCT (upstream, session_id)) AS sessions,
       coalesce(avg(pg_column_size(payload)), 0) AS payload_bytes,
       pg_table_size('chat_session_events') AS table_bytes,
       pg_indexes_size('chat_session_events') AS index_bytes,
       pg_total_relation_size('chat_session_events') AS total_bytes,
       pg_database_size(current_database()) AS database_bytes
FROM chat_session_events
"""

_PER_SESSION = """
SELECT coalesce(avg(n), 0), coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY n), 0),
       coalesce(percentile_disc(0.95) WITHIN GROUP (ORDER BY n), 0), coalesce(max(n), 0)
FROM (SELECT count(*) AS n FROM chat_session_events GROUP BY upstream, session_id) s
"""

# One user message per turn, whichever runtime took it (docs/legacy.md: a legacy user message is a
# `message.updated` whose info has role user; a v2 one is admitted with the prompt).
_TURNS = """
SELECT count(DISTINCT (session_id, coalesce(message_id, payload #>> '{data,info,id}'))) FROM chat_session_events
WHERE type = 'session.next.prompt.admitted'
   OR (type = 'message.updated' AND payload #>> '{data,info,role}' = 'user')
"""


async def footprint(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.connect() as conn:
        size = (await conn.execute(text(_SIZES))).one()
        mean, p50, p95, top = (await conn.execute(text(_PER_SESSION))).one()
        turns = int((await conn.execute(text(_TURNS))).scalar_one())
    events = int(size.events)
    on_disk = int(size.table_bytes) + int(size.index_bytes)
    return {
        "events": events,
        "sessions": int(size.sessions),
        "turns": turns,
        "events_per_turn": round(events / turns, 1) if turns else None,
        "bytes_per_event_on_disk": round(on_disk / events) if events else None,
        "index_bytes_per_event": round(int(size.index_bytes) / events) if events else None,
        # the same relation counted by PostgreSQL in one call: table, TOAST, free space map and indexes
        "total_relation_bytes_per_event": round(int(size.total_bytes) / events) if events else None,
        "payload_bytes_per_event": round(float(size.payload_bytes)),
        "events_per_session": {"mean": round(float(mean), 1), "p50": int(p50), "p95": int(p95), "max": int(top)},
        "database_bytes": int(size.database_bytes),
    }


async def _main(url: str) -> None:
    engine = make_engine(url)
    try:
        print(json.dumps(await footprint(engine), indent=2))
    finally:
        await engine.dispose()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("database_url")
    asyncio.run(_main(ap.parse_args().database_url))
