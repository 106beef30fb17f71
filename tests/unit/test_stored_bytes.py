"""What the durable stream's fast path stores (whole reads framed at once, orjson, one prepare per event) is,
byte for byte, what the plain path stores: the spec's line-by-line framing, the stdlib's decoder, and
PostgreSQL's jsonb text written out here independently (keys shorter first, then by their UTF-8 bytes; `", "`
and `": "`) — for every durable stream of the captures and for generated envelopes cut anywhere."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.events import normalize, parse_envelope, parse_frame
from bridge.store.writes.rows import PreparedEvent, prepare_event
from bridge.upstream.sse import SSEEvent, SSEParser
from tests.unit.test_sse_reference import reference

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
DURABLE = sorted(FIXTURES.glob("*/durable*.sse"))
AT = datetime(2026, 1, 1, tzinfo=UTC)


def jsonb_oracle(value: Any) -> str:
    """PostgreSQL's `jsonb::text` of a float-free JSON value, the slow obvious way."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {jsonb_oracle(value[k])}" for k in keys) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_oracle(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def fast_rows(body: bytes, cuts: list[int]) -> list[PreparedEvent]:
    parser, datas = SSEParser(), []
    for a, b in pairwise([0, *sorted(cuts), len(body)]):
        datas += [i.data for i in parser.feed(body[a:b]) if isinstance(i, SSEEvent)]
    return [prepare_event("u", "ses", normalize(parse_frame(d)), AT) for d in datas]


def plain_rows(body: bytes) -> list[PreparedEvent]:
    datas = [i.data for i in reference(body) if isinstance(i, SSEEvent)]
    return [prepare_event("u", "ses", normalize(parse_envelope(json.loads(d))), AT) for d in datas]


def same_bytes(fast: list[PreparedEvent], plain: list[PreparedEvent]) -> None:
    assert [(p.payload_text, p.values, p.canonical) for p in fast] == \
        [(p.payload_text, p.values, p.canonical) for p in plain]
    for p in fast:
        assert p.canonical and p.payload_text == jsonb_oracle(json.loads(p.payload_text))


def test_every_durable_capture_stores_the_same_bytes_by_either_path() -> None:
    rows = 0
    for path in DURABLE:
        body = path.read_bytes()
        plain = plain_rows(body)
        rows += len(plain)
        same_bytes(fast_rows(body, []), plain)
        same_bytes(fast_rows(body, list(range(0, len(body), 61))), plain)
    assert len(DURABLE) >= 40 and rows >= 294  # every durable stream of the captures (294 events)


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=10)
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), _text)
_json = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=4),
                     max_leaves=10)


@st.composite
def _envelopes(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for seq in range(1, draw(st.integers(1, 6)) + 1):
        data = draw(st.dictionaries(_text, _json, max_size=4))
        data["sessionID"] = "ses"
        out.append({"id": f"evt_{seq}", "type": draw(st.sampled_from(["session.next.text.ended", "x.unknown"])),
                    "durable": {"aggregateID": "ses", "seq": seq, "version": 1}, "data": data})
    return out


@settings(max_examples=200, deadline=None)
@given(_envelopes(), st.lists(st.integers(0, 4000), max_size=8))
def test_generated_envelopes_cut_anywhere_store_the_same_bytes_by_either_path(
    envs: list[dict[str, Any]], cuts: list[int]
) -> None:
    # as the serve writes them: compact, keys in its own order, characters as they are
    body = "".join(f"data: {json.dumps(e, ensure_ascii=False, separators=(',', ':'))}\n\n" for e in envs).encode()
    plain = plain_rows(body)
    assert len(plain) == len(envs)
    same_bytes(fast_rows(body, [c for c in cuts if c <= len(body)]), plain)
