"""The SSE parser against the WHATWG event-stream rules, the real captures, and fuzzing."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.upstream.sse import FrameTooLarge, SSEComment, SSEEvent, SSEItem, SSEParser

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
CAPTURES = sorted(FIXTURES.glob("*/*.sse"))


def _recorded_counts(path: Path) -> dict[str, object] | None:
    counts: dict[str, dict[str, object]] = json.loads((path.parent / "counts.json").read_text())
    return counts.get(path.name.removesuffix(".sse"))


# j-errors probes were recorded without counts; they are still covered by the whole/byte-by-byte test.
COUNTED = [p for p in CAPTURES if _recorded_counts(p) is not None]


def parse(body: bytes, **kw: int) -> list[SSEItem]:
    parser = SSEParser(**kw)
    items = parser.feed(body)
    items += parser.close()
    return items


def parse_chunks(chunks: list[bytes], **kw: int) -> list[SSEItem]:
    parser = SSEParser(**kw)
    items: list[SSEItem] = []
    for chunk in chunks:
        items += parser.feed(chunk)
    items += parser.close()
    return items


def events(body: bytes) -> list[SSEEvent]:
    return [i for i in parse(body) if isinstance(i, SSEEvent)]


# --- framing -----------------------------------------------------------------------------------------


def test_data_line_then_blank_line_dispatches_a_message() -> None:
    assert parse(b"data: hello\n\n") == [SSEEvent("hello")]


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending_style_frames_events(eol: bytes) -> None:
    body = b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert events(body) == [SSEEvent("a\nb"), SSEEvent("c")]


def test_mixed_line_endings_in_one_stream() -> None:
    assert events(b"data: a\r\ndata: b\rdata: c\n\r\n") == [SSEEvent("a\nb\nc")]


def test_cr_at_chunk_end_and_lf_at_next_chunk_start_is_one_line_ending() -> None:
    # Were they two line endings, the second would be a blank line and dispatch "a" early.
    assert parse_chunks([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [SSEEvent("a\nb")]


def test_cr_at_chunk_end_then_empty_chunks_still_pairs_with_the_lf() -> None:
    assert parse_chunks([b"data: a\r", b"", b"\ndata: b\n\n"]) == [SSEEvent("a\nb")]


def test_cr_cr_lf_is_two_line_endings() -> None:
    assert events(b"data: a\r\r\n") == [SSEEvent("a")]


def test_only_cr_and_lf_end_lines_not_other_unicode_line_breaks() -> None:
    # str.splitlines() would also split on these; WHATWG does not.
    data = "a\x0bb\x0cc\x1cd\x85e\u2028f\u2029g"
    assert events(f"data: {data}\n\n".encode()) == [SSEEvent(data)]


def test_data_lines_are_joined_with_newlines() -> None:
    assert events(b"data: one\ndata: two\ndata: three\n\n") == [SSEEvent("one\ntwo\nthree")]


def test_only_one_leading_space_after_the_colon_is_removed() -> None:
    assert events(b"data:  two spaces\ndata:none\n\n") == [SSEEvent(" two spaces\nnone")]


def test_field_without_colon_has_an_empty_value() -> None:
    assert events(b"data\ndata\n\n") == [SSEEvent("\n")]


def test_empty_data_line_dispatches_an_event_with_empty_data() -> None:
    assert events(b"data:\n\n") == [SSEEvent("")]


def test_blank_line_without_data_dispatches_nothing_and_resets_the_event_type() -> None:
    assert events(b"event: ping\n\ndata: x\n\n") == [SSEEvent("x", event="message")]


def test_event_field_sets_the_type_and_empty_event_means_message() -> None:
    assert events(b"event: delta\ndata: x\n\nevent:\ndata: y\n\n") == [
        SSEEvent("x", event="delta"),
        SSEEvent("y", event="message"),
    ]


def test_id_persists_across_events_until_changed() -> None:
    body = b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"
    assert events(body) == [SSEEvent("a", id="7"), SSEEvent("b", id="7"), SSEEvent("c", id="")]


def test_id_containing_nul_is_ignored() -> None:
    assert events(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n") == [
        SSEEvent("a", id="1"),
        SSEEvent("b", id="1"),
    ]


def test_retry_is_reported_only_when_all_ascii_digits() -> None:
    parser = SSEParser()
    out = parser.feed(b"retry: 1500\ndata: a\n\nretry: 12x\ndata: b\n\nretry: \xd9\xa3\ndata: c\n\n")
    assert out == [SSEEvent("a", retry=1500), SSEEvent("b"), SSEEvent("c")]
    assert parser.retry == 1500


def test_absurdly_long_retry_is_ignored_instead_of_raising() -> None:
    parser = SSEParser()
    assert parser.feed(b"retry: " + b"9" * 5000 + b"\ndata: a\n\n") == [SSEEvent("a")]
    assert parser.retry is None


def test_retry_without_data_updates_the_parser_but_dispatches_nothing() -> None:
    parser = SSEParser()
    assert parser.feed(b"retry: 300\n\n") == []
    assert parser.retry == 300


def test_unknown_fields_are_ignored() -> None:
    assert events(b"foo: bar\ndata: x\nDATA: y\n\n") == [SSEEvent("x")]


def test_field_names_are_case_sensitive_and_unpadded() -> None:
    assert events(b" data: x\nData: y\ndata: z\n\n") == [SSEEvent("z")]


# --- comments ----------------------------------------------------------------------------------------


def test_comment_is_returned_with_one_leading_space_stripped() -> None:
    assert parse(b": heartbeat\n\n") == [SSEComment("heartbeat")]


def test_comment_is_returned_immediately_without_waiting_for_a_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b":  two\n:\n") == [SSEComment(" two"), SSEComment("")]


def test_comment_inside_a_frame_does_not_break_the_frame() -> None:
    assert parse(b"data: a\n: hb\ndata: b\n\n") == [SSEComment("hb"), SSEEvent("a\nb")]


# --- BOM and decoding --------------------------------------------------------------------------------


def test_leading_bom_is_stripped_once() -> None:
    assert events(b"\xef\xbb\xbfdata: a\n\n") == [SSEEvent("a")]
    # A second BOM is part of the first field name, which is then unknown.
    assert events(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n") == [SSEEvent("b")]


def test_bom_split_across_chunks_is_still_stripped() -> None:
    assert parse_chunks([b"\xef", b"\xbb", b"\xbfdata: a\n\n"]) == [SSEEvent("a")]


def test_bom_later_in_the_stream_is_kept() -> None:
    assert events(b"data: \xef\xbb\xbfx\n\n") == [SSEEvent("\ufeffx")]


def test_multibyte_character_split_across_chunks_decodes_whole() -> None:
    body = "data: héllo €\n\n".encode()
    assert parse_chunks([body[:8], body[8:9], body[9:15], body[15:]]) == [SSEEvent("héllo €")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert events(b"data: a\xffb\n\n") == [SSEEvent("a\ufffdb")]


# --- end of stream -----------------------------------------------------------------------------------


def test_frame_cut_by_eof_is_discarded() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: complete\n\ndata: cut") == [SSEEvent("complete")]
    assert parser.has_partial_frame
    assert parser.close() == []


def test_frame_with_all_lines_but_no_blank_line_is_discarded_at_eof() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\n") == []
    assert parser.close() == []


def test_close_on_a_clean_boundary_returns_nothing_and_reports_no_partial_frame() -> None:
    parser = SSEParser()
    parser.feed(b"data: x\n\n")
    assert not parser.has_partial_frame
    assert parser.close() == []
    assert parser.close() == []


def test_feed_after_close_is_a_programming_error() -> None:
    parser = SSEParser()
    parser.close()
    with pytest.raises(RuntimeError):
        parser.feed(b"data: x\n\n")


def test_bytes_seen_counts_every_fed_byte() -> None:
    parser = SSEParser()
    parser.feed(b"\xef\xbb\xbfdata: a")
    parser.feed(b"\r")
    parser.feed(b"\n\n")
    assert parser.bytes_seen == 13


# --- memory bound ------------------------------------------------------------------------------------


def test_frame_over_the_limit_raises_frame_too_large() -> None:
    parser = SSEParser(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        parser.feed(b"data: 0123456789A\n\n")
    assert isinstance(info.value, ValueError)


def test_many_data_lines_count_towards_one_frame() -> None:
    parser = SSEParser(max_frame_bytes=20)
    with pytest.raises(FrameTooLarge):
        parser.feed(b"data: 12345\n" * 5)


def test_unterminated_line_over_the_limit_raises_even_when_fed_byte_by_byte() -> None:
    parser = SSEParser(max_frame_bytes=64)
    with pytest.raises(FrameTooLarge):
        for _ in range(100):
            parser.feed(b"x")


def test_frame_too_large_carries_the_events_completed_before_it() -> None:
    parser = SSEParser(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        parser.feed(b"data: ok\n\n: hb\ndata: 0123456789A\n\n")
    assert info.value.events == [SSEEvent("ok"), SSEComment("hb")]


def test_parser_stays_failed_after_frame_too_large() -> None:
    parser = SSEParser(max_frame_bytes=4)
    with pytest.raises(FrameTooLarge):
        parser.feed(b"data: toolong\n")
    with pytest.raises(FrameTooLarge):
        parser.feed(b"\n")


def test_frames_under_the_limit_do_not_accumulate_towards_it() -> None:
    parser = SSEParser(max_frame_bytes=16)
    assert parser.feed(b"data: 0123456789\n\n" * 100) == [SSEEvent("0123456789")] * 100


def test_non_data_lines_are_not_buffered_so_do_not_count() -> None:
    parser = SSEParser(max_frame_bytes=16)
    assert parser.feed(b"event: x\nfoo: 0123456789\n" * 50 + b"data: y\n\n") == [SSEEvent("y", event="x")]


# --- the real captures -------------------------------------------------------------------------------


def test_fixtures_hold_the_captures() -> None:
    assert len({p.parent.name for p in CAPTURES}) >= 20
    assert len(CAPTURES) >= 80


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_capture_parses_identically_whole_and_byte_by_byte(path: Path) -> None:
    body = path.read_bytes()
    whole = parse(body)
    assert parse_chunks([body[i : i + 1] for i in range(len(body))]) == whole
    assert all(isinstance(i, SSEComment) or (i.event == "message" and i.id is None) for i in whole)


@pytest.mark.parametrize("path", COUNTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_capture_matches_the_event_counts_recorded_at_capture_time(path: Path) -> None:
    # counts.json was written by the capture harness with its own parser: an independent oracle.
    recorded = _recorded_counts(path)
    assert recorded is not None
    items = parse(path.read_bytes())
    evs = [i for i in items if isinstance(i, SSEEvent)]
    assert len(evs) == recorded["events"]
    assert sum(isinstance(i, SSEComment) for i in items) == recorded["comments"]
    by_type: dict[str, int] = {}
    for ev in evs:
        # The harness read a top-level `type`; /global/event frames have none (their type is under
        # `payload`, docs/upstream.md §15), so it recorded them all as "null": the same oracle, read alike.
        t = str(json.loads(ev.data).get("type")).replace("None", "null")
        by_type[t] = by_type.get(t, 0) + 1
    assert by_type == recorded["by_type"]


def test_live_capture_heartbeats_are_comments() -> None:
    items = parse((FIXTURES / "a-text-turn" / "live.sse").read_bytes())
    assert SSEComment("heartbeat") in items


# --- fuzzing -----------------------------------------------------------------------------------------

_line_text = st.text(alphabet=st.characters(codec="utf-8", blacklist_characters="\r\n"), max_size=30)
_eol = st.sampled_from(["\n", "\r", "\r\n"])


@st.composite
def _stream_with_cuts(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    body = draw(
        st.one_of(
            st.lists(
                st.sampled_from(
                    [
                        b"data: x\n",
                        b"data: \xc3\xa9\xe2\x82\xac\r\n",
                        b"\r\n",
                        b"\n",
                        b"\r",
                        b": heartbeat\n",
                        b"event: e\r",
                        b"id: 1\n",
                        b"retry: 5\n",
                        b"\xef\xbb\xbf",
                        b"data",
                    ]
                ),
                max_size=30,
            ).map(b"".join),
            st.binary(max_size=200),
        )
    )
    cuts = draw(st.lists(st.integers(0, len(body)), max_size=12))
    return body, sorted(cuts)


@settings(max_examples=300, deadline=None)
@given(_stream_with_cuts())
def test_any_chunking_of_a_stream_gives_the_same_items_as_feeding_it_whole(
    case: tuple[bytes, list[int]],
) -> None:
    body, cuts = case
    bounds = [0, *cuts, len(body)]
    chunks = [body[a:b] for a, b in pairwise(bounds)]
    assert parse_chunks(chunks) == parse(body)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(1, 64))
def test_arbitrary_bytes_never_raise_anything_but_frame_too_large(chunks: list[bytes], limit: int) -> None:
    parser = SSEParser(max_frame_bytes=limit)
    try:
        for chunk in chunks:
            parser.feed(chunk)
        parser.close()
    except FrameTooLarge:
        pass


@st.composite
def _events(draw: st.DrawFn) -> list[SSEEvent]:
    out: list[SSEEvent] = []
    last_id: str | None = None
    for _ in range(draw(st.integers(0, 5))):
        lines = draw(st.lists(_line_text, min_size=1, max_size=4))
        event = draw(st.one_of(st.just(""), _line_text))
        if draw(st.booleans()):
            last_id = draw(_line_text.filter(lambda s: "\0" not in s))
        out.append(SSEEvent("\n".join(lines), event=event or "message", id=last_id))
    return out


def _serialize(evs: list[SSEEvent], eols: list[str]) -> str:
    lines: list[str] = []
    last_id: str | None = None
    for ev in evs:
        if ev.id != last_id:
            lines.append(f"id: {ev.id}")
            last_id = ev.id
        if ev.event != "message" or len(lines) % 3 == 0:
            lines.append(f"event: {ev.event}")
        lines.extend(f"data: {line}" for line in ev.data.split("\n"))
        lines.append("")
    out: list[str] = []
    prev_eol = ""
    for n, line in enumerate(lines):
        eol = eols[n % len(eols)]
        if prev_eol == "\r" and not line and eol.startswith("\n"):
            # CR then LF is one line ending by definition; a writer must not emit a blank line that way.
            eol = "\r"
        out.append(line + eol)
        prev_eol = eol
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(_events(), st.lists(_eol, min_size=1, max_size=5), st.booleans())
def test_generated_events_round_trip_through_any_line_endings(
    evs: list[SSEEvent], eols: list[str], bom: bool
) -> None:
    body = ("\ufeff" if bom else "") + _serialize(evs, eols)
    assert events(body.encode()) == evs
