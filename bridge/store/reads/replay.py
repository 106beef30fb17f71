"""Stored events as WebSocket `event` frames, built by PostgreSQL from the normalized columns (reads).

Replay and the live feed send every stored event as the frame `bridge.fanout.protocol.event_message`
describes (docs/websocket.md). Building it in Python means decoding each stored payload, parsing and
normalizing the envelope again and encoding the frame: three passes over every event. For a v2 row
PostgreSQL builds the frame text in one pass instead, from what the writer already normalized — the
columns — plus what has no column, read from the payload (`timestamp_ms`, `text`, a tool's `input` and
`output_text`, the upstream `data`), and the kind of the type under today's table; the bridge forwards
the text. A legacy row (docs/legacy.md) comes back as its payload and stored kind, for Python to frame.
`tests/integration/test_replay_frames.py` pins that both give `event_message` for every captured event.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import TYPE_KINDS, Kind
from bridge.events.content import CONTENT_KINDS

# (seq, frame text | None, payload | None, kind column): a frame for a v2 row, the payload for a legacy one.
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
_BY_PYTHON = f"({_LEGACY} OR CAST(:python_kinds AS jsonb) ? k.kind)"
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

# Integers only, like bridge.events' _int (a float or a string timestamp is no timestamp_ms).
_TIMESTAMP = """CASE WHEN jsonb_typeof(e.payload->'data'->'timestamp') = 'number'
                       AND (e.payload->'data'->>'timestamp') ~ '^-?[0-9]+$'
                  THEN e.payload->'data'->'timestamp' END"""

_FIELDS = f"""jsonb_strip_nulls(jsonb_build_object(
        'timestamp_ms', {_TIMESTAMP},
        'message_id', e.message_id, 'assistant_message_id', e.assistant_message_id, 'part_id', e.part_id,
        'call_id', e.call_id, 'tool_name', e.tool_name, 'error_type', e.error_type,
        'error_message', e.error_message, 'finish', e.finish,
        'tokens_input', e.tokens_input, 'tokens_output', e.tokens_output, 'tokens_reasoning', e.tokens_reasoning,
        'tokens_cache_read', e.tokens_cache_read, 'tokens_cache_write', e.tokens_cache_write,
        'cost', e.cost, 'text', x.text, 'delivery', e.delivery, 'agent', e.agent, 'model_id', e.model_id,
        'provider_id', e.provider_id, 'child_session_id', {_CHILD}))
    || CASE WHEN x.input IS NULL THEN '{{}}'::jsonb ELSE jsonb_build_object('input', x.input) END
    || CASE WHEN x.output_text IS NULL THEN '{{}}'::jsonb ELSE jsonb_build_object('output_text', x.output_text) END"""

FRAMES_AFTER = text(f"""
SELECT e.seq,
       CASE WHEN NOT {_BY_PYTHON} THEN json_build_object(
           'type', 'event', 'session', e.session_id, 'seq', e.seq, 'event_id', e.event_id, 'event_type', e.type,
           'kind', k.kind, 'fields', {_FIELDS}, 'data', {_DATA})::text END AS frame,
       CASE WHEN {_BY_PYTHON} THEN e.payload END AS payload,
       e.kind
FROM chat_session_events e
CROSS JOIN LATERAL (SELECT coalesce(CAST(:kinds AS jsonb) ->> e.type, 'unknown') AS kind) k
CROSS JOIN LATERAL (SELECT {_JOINED} AS joined) o
CROSS JOIN LATERAL (SELECT {_TEXT} AS text, {_INPUT} AS input, {_OUTPUT_TEXT} AS output_text) x
WHERE e.upstream = :u AND e.session_id = :s AND e.seq > :after
  AND e.session_day = (SELECT sd.session_day FROM chat_sessions sd WHERE sd.upstream = :u AND sd.session_id = :s)
ORDER BY e.seq
LIMIT :limit
""").bindparams(bindparam("u"), bindparam("s"), bindparam("after"), bindparam("limit"), bindparam("kinds"),
            bindparam("python_kinds"))

# The kind is the type's kind under today's table (bridge.events.TYPE_KINDS), as a Python replay computes
# it, not the one stored: a type mapped after its events were stored replays with its new kind.
_KINDS = json.dumps({str(t): str(k) for t, k in TYPE_KINDS.items()})


async def frames_after(engine: AsyncEngine, upstream: str, session_id: str, after: int,
                       limit: int) -> list[StoredFrame]:
    """The stored events with seq > after, in seq order, at most `limit`, as `StoredFrame`s."""
    async with engine.connect() as conn:
        rows = await conn.execute(FRAMES_AFTER, {"u": upstream, "s": session_id, "after": after, "limit": limit,
                                                 "kinds": _KINDS, "python_kinds": _PYTHON_KINDS})
        return [(int(r[0]), r[1], r[2], r[3]) for r in rows]
