"""The hash chain: recomputation, and the first broken link for each kind of tampering."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from bridge.store.hash_chain import GENESIS, ChainRow, extend_chain, link, verify_chain


def chained(payloads: list[str]) -> list[ChainRow]:
    links = extend_chain(GENESIS, [(i + 1, f"evt_{i}", p) for i, p in enumerate(payloads)])
    return [ChainRow(seq, f"evt_{seq - 1}", payloads[seq - 1], h) for seq, h in links]


def test_link_is_sha256_hex_and_depends_on_every_input() -> None:
    base = link(GENESIS, 1, "evt_a", '{"a": 1}')
    assert len(base) == 64
    assert len({base, link(base, 1, "evt_a", '{"a": 1}'), link(GENESIS, 2, "evt_a", '{"a": 1}'),
                link(GENESIS, 1, "evt_b", '{"a": 1}'), link(GENESIS, 1, "evt_a", '{"a": 2}')}) == 5


@given(st.lists(st.text(max_size=20), max_size=20))
def test_an_untouched_chain_verifies(payloads: list[str]) -> None:
    report = verify_chain(chained(payloads))
    assert report.ok and report.events == len(payloads)
    assert report.head == (chained(payloads)[-1].chain_hash if payloads else GENESIS)


def test_changed_payload_is_reported_at_its_seq() -> None:
    rows = chained(["a", "b", "c", "d"])
    rows[2] = replace(rows[2], payload_text="C")
    report = verify_chain(rows)
    assert report.broken is not None and report.broken.seq == 3


def test_deleted_row_is_reported_at_the_next_seq() -> None:
    rows = chained(["a", "b", "c", "d"])
    del rows[1]
    report = verify_chain(rows)
    assert report.broken is not None and report.broken.seq == 3


def test_row_without_a_hash_is_reported() -> None:
    rows = chained(["a", "b"])
    rows[1] = replace(rows[1], chain_hash=None)
    broken = verify_chain(rows).broken
    assert broken is not None and broken.reason == "missing_hash"


def test_rehashing_one_row_breaks_the_next() -> None:
    rows = chained(["a", "b", "c"])
    forged = link(rows[0].chain_hash or "", 2, "evt_1", "B")
    rows[1] = replace(rows[1], payload_text="B", chain_hash=forged)
    broken = verify_chain(rows).broken
    assert broken is not None and broken.seq == 3
