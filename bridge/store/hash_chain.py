"""The per-session hash chain over stored events (tamper evidence). Pure.

    link(n) = sha256( link(n-1) "\\n" seq "\\n" event_id "\\n" payload_text )   hex, link(0) = GENESIS

`payload_text` is PostgreSQL's own text form of the stored `jsonb` (`payload::text`): canonical (keys
sorted, fixed spacing, numbers as stored), so the writer and a verifier years later hash the same bytes
whatever JSON library they use. Links are taken in `seq` order. The chain proves that no stored event
was altered, removed or inserted *before the last link you trust*: keep the head (`verify` prints it,
`export` writes it) somewhere else to make truncation at the end detectable too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

GENESIS = "0" * 64


def link(prev: str, seq: int, event_id: str, payload_text: str) -> str:
    h = hashlib.sha256()
    h.update(f"{prev}\n{seq}\n{event_id}\n".encode())
    h.update(payload_text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@dataclass(frozen=True)
class ChainRow:
    seq: int
    event_id: str
    payload_text: str
    chain_hash: str | None


@dataclass(frozen=True)
class BrokenLink:
    seq: int
    event_id: str
    expected: str
    stored: str | None
    reason: str  # payload_or_id_changed | missing_hash | out_of_order


@dataclass(frozen=True)
class ChainReport:
    events: int
    head: str  # the last link recomputed (GENESIS for an empty session)
    broken: BrokenLink | None

    @property
    def ok(self) -> bool:
        return self.broken is None


def verify_chain(rows: Iterable[ChainRow]) -> ChainReport:
    """Recompute the chain in seq order; report the first link that does not match what is stored."""
    prev = GENESIS
    last_seq: int | None = None
    count = 0
    for r in rows:
        count += 1
        expected = link(prev, r.seq, r.event_id, r.payload_text)
        if last_seq is not None and r.seq <= last_seq:
            return ChainReport(count, prev, BrokenLink(r.seq, r.event_id, expected, r.chain_hash, "out_of_order"))
        if r.chain_hash is None:
            return ChainReport(count, prev, BrokenLink(r.seq, r.event_id, expected, None, "missing_hash"))
        if r.chain_hash != expected:
            # Either this row changed, or a row before it was removed/inserted (its prev differs).
            return ChainReport(count, prev, BrokenLink(r.seq, r.event_id, expected, r.chain_hash,
                                                       "payload_or_id_changed_or_row_missing_before"))
        prev, last_seq = expected, r.seq
    return ChainReport(count, prev, None)


def extend_chain(prev: str, rows: Iterable[tuple[int, str, str]]) -> list[tuple[int, str]]:
    """(seq, link) for new rows (seq, event_id, payload_text) appended after `prev`, in the given order."""
    out: list[tuple[int, str]] = []
    for seq, event_id, payload_text in rows:
        prev = link(prev, seq, event_id, payload_text)
        out.append((seq, prev))
    return out
