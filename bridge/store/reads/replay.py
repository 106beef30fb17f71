"""Stored events as WebSocket `event` frames, built by PostgreSQL from the normalized columns (reads).

Replay and the live feed send every stored event as the frame `bridge.fanout.protocol.event_message`
describes (docs/websocket.md). Building it in Python means decoding each stored payload, parsing and
normalizing the envelope again and encoding the frame: three passes over every event. For a v2 row
PostgreSQL builds the frame text in one pass instead, from what the writer already normalized — the
columns — plus what has no column, read from the payload (`timestamp_ms`, `text`, a tool's `input` and
`output_text`, the upstream `data`), and the kind of the type under today's table; the bridge forwards
the text. The common legacy rows (docs/legacy.md) are framed from their payload and stored kind
(bridge.store.reads.replay_legacy); the other rows come back as their payload and stored kind, for Python to
frame. The frame is printed as text (bridge.store.reads.sql_json); docs/websocket.md "Replay of a long
session" says why here and not at write time. `tests/integration/test_replay_frames.py` and
`test_replay_legacy_frames.py` pin that both give `event_message` for every captured event.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncEngine

import bridge.store.reads.replay_legacy as legacy
import bridge.store.reads.sql_json as sql_json
from bridge.events import TYPE_KINDS, Kind
from bridge.events.content import CONTENT_KINDS

# (seq, frame text | None, payload | None, kind column): the frame PostgreSQL built, else the payload for Python.
StoredFrame = tuple[int, str | None, Any, str | None]

_LEGACY = "(e.payload ? 'aggregate_id' AND NOT e.payload ? 'durable')"
# Framed by Python too: a legacy row, and a v2 row of a kind whose fields are read from the payload by the
# content mapping (bridge.events.content: attachments, synthetic text, compaction, retry, shell, undo …; rare
# rows), so replay and live frames stay equal as kinds gain fields. A tool's `child_session_id` is built here.
_TOOL_KINDS = (Kind.TOOL_START, Kind.TOOL_SUCCESS, Kind.TOOL_FAIL)
# `unknown` too: a type today's table does not know — among them OpenCode 2.x's, which Python maps
# (bridge.events.gen2); an unknown row frames alike either way.
_PYTHON_KINDS = json.dumps(sorted(str(k) for k in (CONTENT_KINDS - set(_TOOL_KINDS))
                                  | {Kind.PROMPT_SYNTHETIC, Kind.SESSION_CREATED, Kind.UNKNOWN}))
_CHILD = """CASE WHEN k.kind IN ('tool:start', 'tool:success', 'tool:fail')
                   AND jsonb_typeof(e.payload->'data'->'state'->'metadata'->'sessionId') = 'string'
                  THEN e.payload->'data'->'state'->'metadata'->>'sessionId' END"""

# fields.text: what bridge.events puts there for a stored kind (deltas are never stored).
_TEXT = """CASE
    WHEN k.kind IN ('text:end', 'reasoning:end', 'tool:input-end')
         AND jsonb_typeof(e.payload->'data'->'text') = 'string' THEN e.payload->'data'->>'text'
    WHEN k.kind IN ('prompt:admitted', 'prompt:started')
         AND jsonb_typeof(e.payload->'data'->'prompt'->'text') = 'string' THEN e.payload->'data'->'prompt'->>'text'
END"""

# fields.input: `data.input` of a tool event, unless absent or null (protocol._tool_fields).
_INPUT = """CASE WHEN k.kind IN ('tool:start', 'tool:success', 'tool:fail')
                   AND jsonb_typeof(e.payload->'data'->'input') <> 'null' THEN e.payload->'data'->'input' END"""

# fields.output_text of tool:success: its text parts joined, else `structured.content` (ChatEvent.tool_output_text).
_OUTPUT_TEXT = """CASE WHEN k.kind = 'tool:success' THEN
    CASE WHEN coalesce(o.joined, '') = '' AND jsonb_typeof(e.payload->'data'->'structured'->'content') = 'string'
              AND jsonb_typeof(e.payload->'data'->'structured') = 'object'
         THEN e.payload->'data'->'structured'->>'content'
         WHEN jsonb_typeof(e.payload->'data'->'content') = 'array' THEN coalesce(o.joined, '')
    END
END"""
_JOINED = """(SELECT string_agg(x->>'text', '' ORDER BY n)
    FROM jsonb_array_elements(CASE WHEN k.kind = 'tool:success' AND jsonb_typeof(e.payload->'data'->'content') = 'array'
                                   THEN e.payload->'data'->'content' END) WITH ORDINALITY AS t(x, n)
    WHERE jsonb_typeof(x) = 'object' AND x->'type' = '"text"'::jsonb AND jsonb_typeof(x->'text') = 'string')"""

# data without the text fields.text already carries (ChatEvent.data_without_text).
_DATA = """CASE
    WHEN jsonb_typeof(e.payload->'data') IS DISTINCT FROM 'object' THEN '{}'::jsonb
    WHEN x.text IS NULL THEN e.payload->'data'
    ELSE (SELECT CASE WHEN jsonb_typeof(d.v->'prompt') = 'object' AND jsonb_typeof(d.v->'prompt'->'text') = 'string'
                           AND d.v->'prompt'->>'text' = x.text
                      THEN jsonb_set(d.v, '{prompt}', (d.v->'prompt') - 'text') ELSE d.v END
          FROM (SELECT CASE WHEN jsonb_typeof(e.payload->'data'->'text') = 'string'
                                 AND e.payload->'data'->>'text' = x.text
                            THEN (e.payload->'data') - 'text' ELSE e.payload->'data' END AS v) d)
END"""

# Integers only, like bridge.events' _int (a float or a string timestamp is no timestamp_ms; a jsonb number
# prints in plain digits, so a point tells a float: no regular expression, bridge.store.reads.replay_legacy).
_TIMESTAMP = """CASE WHEN jsonb_typeof(e.payload->'data'->'timestamp') = 'number'
                       AND strpos(e.payload->'data'->>'timestamp', '.') = 0
                  THEN e.payload->'data'->'timestamp' END"""

_FIELDS = sql_json.obj([
    ("timestamp_ms", sql_json.jsonb(_TIMESTAMP)),
    *((c, sql_json.value(f"e.{c}")) for c in ("message_id", "assistant_message_id", "part_id", "call_id", "tool_name",
                                              "error_type", "error_message", "finish", "tokens_input",
                                              "tokens_output", "tokens_reasoning", "tokens_cache_read",
                                              "tokens_cache_write", "cost")),
    ("text", sql_json.value("x.text")),
    *((c, sql_json.value(f"e.{c}")) for c in ("delivery", "agent", "model_id", "provider_id")),
    ("child_session_id", sql_json.value(_CHILD)),
    ("input", sql_json.jsonb("x.input")),
    ("output_text", sql_json.value("x.output_text")),
])

# The `event` frame (bridge.fanout.protocol.event_message), printed by PostgreSQL.
def frame(kind: str, fields: str, data: str) -> str:
    return sql_json.obj([("type", "'\"event\"'"), ("session", sql_json.value("e.session_id")),
                         ("seq", "e.seq::text"), ("event_id", sql_json.value("e.event_id")),
                         ("event_type", sql_json.value("e.type")), ("kind", sql_json.value(kind)),
                         ("fields", fields), ("data", sql_json.jsonb(data))])


# Every lateral that a later one reads more than once ends in OFFSET 0: computed once per row. Without it
# PostgreSQL puts the expression in at each use — `r.legacy` (two key lookups in the payload) and `k.kind` (a
# lookup in the kinds' table) were evaluated again at every mention (BENCHMARKS.md "Replay of real sessions").
FRAMES_AFTER = text(f"""
SELECT e.seq, f.frame, CASE WHEN f.frame IS NULL THEN e.payload END AS payload, e.kind
FROM chat_session_events e
CROSS JOIN LATERAL (SELECT {_LEGACY} AS legacy OFFSET 0) r
CROSS JOIN LATERAL (SELECT coalesce((SELECT CAST(:kinds AS jsonb)) ->> e.type, 'unknown') AS kind OFFSET 0) k
{legacy.LATERALS}
CROSS JOIN LATERAL (SELECT CASE WHEN k.kind = 'tool:success' AND NOT r.legacy THEN {_JOINED} END AS joined) o
CROSS JOIN LATERAL (SELECT {_TEXT} AS text, {_INPUT} AS input, {_OUTPUT_TEXT} AS output_text OFFSET 0) x
CROSS JOIN LATERAL (SELECT CASE
    WHEN r.legacy THEN CASE WHEN {legacy.BY_SQL} THEN {frame("e.kind", legacy.FIELDS, legacy.DATA)} END
    WHEN NOT (SELECT CAST(:python_kinds AS jsonb)) ? k.kind THEN {frame("k.kind", _FIELDS, _DATA)}
    END AS frame OFFSET 0) f
WHERE e.upstream = :u AND e.session_id = :s AND e.seq > :after
  AND e.session_day = (SELECT sd.session_day FROM chat_sessions sd WHERE sd.upstream = :u AND sd.session_id = :s)
ORDER BY e.seq
LIMIT :limit
""").bindparams(bindparam("u"), bindparam("s"), bindparam("after"), bindparam("limit"), bindparam("kinds"),
            bindparam("python_kinds"))

# The kind is the type's kind under today's table (bridge.events.TYPE_KINDS), as a Python replay computes
# it, not the one stored: a type mapped after its events were stored replays with its new kind.
_KINDS = json.dumps({str(t): str(k) for t, k in TYPE_KINDS.items()})


# The statement is long: planning it again for every page (PostgreSQL's custom plans, which `auto` keeps
# choosing here) costs more than reading a short page. Its plan does not depend on the values (an index
# range of one session), so each connection plans it once (asyncpg keeps it prepared), for this
# transaction only (BENCHMARKS.md, "Replay of real sessions").
GENERIC_PLAN = text("SET LOCAL plan_cache_mode = force_generic_plan")


async def frames_after(engine: AsyncEngine, upstream: str, session_id: str, after: int,
                       limit: int) -> list[StoredFrame]:
    """The stored events with seq > after, in seq order, at most `limit`, as `StoredFrame`s."""
    async with engine.connect() as conn:
        await conn.execute(GENERIC_PLAN)
        rows = await conn.execute(FRAMES_AFTER, {"u": upstream, "s": session_id, "after": after, "limit": limit,
                                                 "kinds": _KINDS, "python_kinds": _PYTHON_KINDS})
        return [(int(r[0]), r[1], r[2], r[3]) for r in rows]
