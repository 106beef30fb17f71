"""The streaming sync-log answer reader (bridge.upstream.sync_answer): whatever the chunking, it keeps
exactly the asked aggregates' items (as the stdlib decodes them), notes every aggregate's highest seq, and
hands every input it could read differently from the stdlib to the whole-body path."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import BodyTooLarge
from bridge.upstream import sync_answer
from bridge.upstream.sync_answer import NotStreamable, SyncAnswerReader, whole_answer

AGGS = ["ses_A", "ses_B", "ses_C", "ses_D"]
_text = st.text(max_size=12)  # lone surrogates too: their escapes are the stdlib's to read
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63) + 1, 2**63 - 1),
                  st.floats(allow_nan=False, allow_infinity=False), _text,
                  st.sampled_from(['},{"id":"x', '"]', "\\", "[{", "\u2028", "é😀", "\\ud83d", "\\\\uD800x", "\ud800"]))
_json = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=12)
_item = st.one_of(
    st.fixed_dictionaries({"id": _text, "aggregate_id": st.sampled_from(AGGS), "seq": st.integers(0, 50),
                           "type": st.just("message.updated.1"), "data": _json}),
    _json,  # not an item: belongs to no session (kept, for a session of the call to reject)
)


def _read(raw: bytes, keep: dict[str, int], cuts: list[int], *, bound: int = 1 << 30) -> Any:
    r = SyncAnswerReader(keep, max_kept_bytes=bound)
    last = 0
    for c in sorted(cuts):  # a cut twice at one place feeds an empty chunk
        if 0 <= c <= len(raw):
            r.feed(raw[last:c])
            last = c
    r.feed(raw[last:])
    return r.close()


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


@settings(max_examples=200, deadline=None)
@given(items=st.lists(_item, max_size=12), keep=st.dictionaries(st.sampled_from(AGGS), st.integers(-1, 50)),
       cuts=st.lists(st.integers(0, 400), max_size=8), ascii_only=st.booleans(), spaced=st.booleans())
def test_any_chunking_keeps_what_the_whole_read_keeps(items: list[Any], keep: dict[str, int], cuts: list[int],
                                                      ascii_only: bool, spaced: bool) -> None:
    lone = _has_lone_surrogate(items)
    raw = json.dumps(items, ensure_ascii=ascii_only or lone, separators=(", ", ": ") if spaced else (",", ":"),
                     ).encode()
    expected = whole_answer(json.loads(raw), keep, len(raw))
    assert all(i["seq"] > keep[i["aggregate_id"]] for i in expected.items
               if isinstance(i, dict) and i.get("aggregate_id") in AGGS and type(i.get("seq")) is int)
    try:
        got = _read(raw, keep, cuts)
    except NotStreamable:
        assert lone  # only what ijson reads otherwise: a pair, and text like `\\ud83d`, stream
        return
    assert got.items == expected.items
    assert got.seen == expected.seen
    assert got.answered == len(items) and got.bytes == len(raw)


@pytest.mark.parametrize("raw", [
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":NaN}}]',
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":123456789012345678901234567890}}]',
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":1e999}}]',
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":"\\ud800"}}]',
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":"\xff"}}]',
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":"a\tb"}}]',
    b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":-9223372036854775808}}]',  # yajl's int64 edge
    b'{"not":"an array"}',
    b'',
    b'[{"aggregate_id":"ses_A","seq":1}',  # cut short
    b'[{"aggregate_id":"ses_A","seq":1,"data":' + b"[" * 300 + b"]" * 300 + b"}]",  # deeper than orjson encodes
])
def test_what_ijson_reads_otherwise_goes_the_stdlib_way(raw: bytes) -> None:
    with pytest.raises(NotStreamable):
        _read(raw, {"ses_A": 0}, [3, 17])


def test_a_surrogate_escape_cut_between_two_chunks_is_seen() -> None:
    raw = b'[{"aggregate_id":"ses_A","seq":1,"data":{"x":"\\ud800"}}]'
    at = raw.index(b"\\ud8") + 2
    with pytest.raises(NotStreamable):
        _read(raw, {"ses_A": 0}, [at])


def test_only_the_kept_part_counts_against_the_bound() -> None:
    others = [{"aggregate_id": "ses_B", "seq": s, "data": {"t": "x" * 500}} for s in range(100)]
    mine = [{"aggregate_id": "ses_A", "seq": 1, "data": {}}]
    raw = json.dumps(others + mine).encode()
    got = _read(raw, {"ses_A": -1}, [1000, 20000], bound=200)
    assert got.items == mine and got.seen == {"ses_B": 99, "ses_A": 1} and got.answered == 101
    with pytest.raises(BodyTooLarge):
        _read(raw, {"ses_B": -1}, [], bound=2000)
    assert _read(raw, {"ses_B": 98}, [], bound=2000).items == others[99:]  # only what is above the cursor


def test_one_item_larger_than_the_bound_is_refused_even_when_dropped() -> None:
    raw = json.dumps([{"aggregate_id": "ses_B", "seq": 1, "data": {"t": "x" * 5000}}]).encode()
    with pytest.raises(BodyTooLarge):
        _read(raw, {"ses_A": -1}, list(range(0, len(raw), 100)), bound=1000)


def test_text_that_only_looks_like_a_surrogate_escape_streams() -> None:
    items = [{"aggregate_id": "ses_A", "seq": 1, "data": {"src": 'const s = "\\uD83D\\uDE00" // \\ud800'}}]
    raw = json.dumps(items).encode()
    assert b"\\\\uD83D" in raw
    for cut in range(len(raw)):
        assert _read(raw, {"ses_A": 0}, [cut]).items == items


_ESCAPE_BITS = [b"\\", b"\\\\", b"\\u", b"d8", b"D8", b"dc", b"DF", b"00", b"3d", b"ude00", b"\\ud83d\\ude00",
                b"\\uDC00", b"u", b"x", b'"', b"e9"]
_escape_bits = st.lists(st.sampled_from(_ESCAPE_BITS), max_size=24).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(_escape_bits, st.booleans())
def test_the_quick_look_only_skips_a_scan_that_would_find_nothing(buf: bytes, final: bool) -> None:
    fast = sync_answer.lone_surrogate(buf, final=final)
    with patch.object(sync_answer, "_CANDIDATE", re.compile(b"")):  # the scan alone, at every byte, as before
        assert sync_answer.lone_surrogate(buf, final=final) == fast
