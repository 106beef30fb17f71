"""The hash chain set at write time (docs/audit.md), inside the write transaction: PostgreSQL links the rows
just inserted when Python could not (bridge.store.writes.transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from sqlalchemy import BigInteger, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge.store.hash_chain import GENESIS


async def chain_new_events(
    conn: AsyncConnection, upstream: str, session_id: str, day: date, seqs: Sequence[int]
) -> None:
    """Set `chain_hash` on the rows just inserted, in one statement (one round trip). write_batch holds
    the session row lock, so no other writer extends this session's chain concurrently. PostgreSQL
    computes exactly `bridge.store.hash_chain.link` over the payload as stored (`payload::text`); the
    verifier recomputes it in Python (tests/integration/test_audit_store.py checks they agree)."""
    if seqs:
        await conn.execute(_CHAIN_NEW_EVENTS, {"u": upstream, "s": session_id, "d": day, "seqs": list(seqs),
                                               "genesis": GENESIS})


# link(prev, seq, event_id, payload_text) = sha256(prev "\n" seq "\n" event_id "\n" payload_text), hex.
_CHAIN_NEW_EVENTS = text("""
WITH RECURSIVE
fresh AS (
    SELECT seq, event_id, payload::text AS payload_text, row_number() OVER (ORDER BY seq) AS n
    FROM chat_session_events
    WHERE upstream = :u AND session_id = :s AND session_day = :d AND seq = ANY(CAST(:seqs AS bigint[]))
),
before AS (
    SELECT chain_hash FROM chat_session_events
    WHERE upstream = :u AND session_id = :s AND session_day = :d AND seq < (SELECT min(seq) FROM fresh)
    ORDER BY seq DESC LIMIT 1
),
chain (n, seq, h) AS (
    SELECT f.n, f.seq, encode(sha256(convert_to(
        coalesce((SELECT chain_hash FROM before), :genesis) || E'\n' || f.seq || E'\n' || f.event_id
        || E'\n' || f.payload_text, 'UTF8')), 'hex')
    FROM fresh f WHERE f.n = 1
    UNION ALL
    SELECT f.n, f.seq, encode(sha256(convert_to(
        c.h || E'\n' || f.seq || E'\n' || f.event_id || E'\n' || f.payload_text, 'UTF8')), 'hex')
    FROM chain c JOIN fresh f ON f.n = c.n + 1
)
UPDATE chat_session_events e SET chain_hash = chain.h
FROM chain
WHERE e.upstream = :u AND e.session_id = :s AND e.session_day = :d AND e.seq = chain.seq
""").bindparams(bindparam("seqs", type_=ARRAY(BigInteger)))
