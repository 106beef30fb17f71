"""The parent's pure decisions (bridge.workers.policy): notify datagrams, restarts, wedged workers, the status
line, and the cuts of the `/global/event` byte stream handed to workers."""

from __future__ import annotations

import itertools
import os

from hypothesis import given
from hypothesis import strategies as st

from bridge.config import load_settings
from bridge.errors import ConfigError
from bridge.upstream.sse import SSEEvent, SSEParser
from bridge.workers.policy import EventCutter, RestartPolicy, first_event, parse_notification, set_status, wedged


def test_a_notification_is_key_value_lines_and_the_last_of_a_key_wins() -> None:
    fields = parse_notification(b"READY=1\nSTATUS=following 3 sessions\nnonsense\nSTATUS=x=y\n\xff=1")
    assert fields == {"READY": "1", "STATUS": "x=y", "\ufffd": "1"}
    assert parse_notification(b"") == {}


def test_restarts_double_up_to_the_cap_and_a_healthy_run_starts_over() -> None:
    policy = RestartPolicy(min_s=0.5, max_s=4.0, healthy_run_s=60.0)
    assert [policy.delay_after(1.0) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert policy.delay_after(61.0) == 0.5
    assert policy.delay_after(0.1) == 1.0


def test_only_a_ready_worker_silent_past_its_watchdog_is_wedged() -> None:
    assert wedged(100.0, 69.0, True, 30.0)
    assert not wedged(100.0, 71.0, True, 30.0)
    assert not wedged(100.0, 0.0, False, 30.0)  # still starting: the start has its own bounds


def test_the_status_line_counts_ready_workers_and_keeps_each_line() -> None:
    line = set_status(3, {0: "following 2 sessions", 1: "restarting", 2: ""}, {0: True, 1: False})
    assert line == "workers 1/3 ready · w0: following 2 sessions · w1: restarting"


def events(parser: SSEParser, data: bytes) -> list[SSEEvent]:
    return [e for e in parser.feed(data) if isinstance(e, SSEEvent)]


frames = st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"),
                          max_size=40), min_size=1, max_size=12)


@given(frames, st.sampled_from([b"\n", b"\r\n"]), st.lists(st.integers(0, 400), max_size=12))
def test_the_cut_stream_parses_to_the_same_events_and_every_piece_is_whole_events(
        datas: list[str], eol: bytes, cuts: list[int]) -> None:
    stream = b"".join(b"data: " + d.encode() + eol + eol for d in datas)
    bounds = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    cutter = EventCutter()
    pieces = [cutter.feed(stream[a:b]) for a, b in itertools.pairwise(bounds)]
    assert b"".join(pieces) == stream and cutter.pending == 0
    whole = events(SSEParser(), stream)
    assert [e.data for e in whole] == datas
    for piece in pieces:  # each piece alone: whole events, none split (what a worker joining there would get)
        fresh = SSEParser()
        got = events(fresh, piece)
        assert not fresh.has_partial_frame
        assert len(got) == piece.count(eol + eol)


@given(frames)
def test_first_event_splits_the_opening_event_from_the_rest(datas: list[str]) -> None:
    stream = b"".join(b"data: " + d.encode() + b"\n\n" for d in datas)
    hello, rest = first_event(stream)
    assert hello == b"data: " + datas[0].encode() + b"\n\n" and hello + rest == stream
    assert first_event(b"data: half") == (b"", b"data: half")


def test_bridge_workers_defaults_to_the_cores_and_must_be_positive() -> None:
    assert load_settings({}).workers == (os.cpu_count() or 1)
    assert load_settings({"BRIDGE_WORKERS": "3"}).workers == 3
    for bad in ("0", "-1", "two"):
        try:
            load_settings({"BRIDGE_WORKERS": bad})
        except ConfigError as e:
            assert "BRIDGE_WORKERS" in str(e)
        else:
            raise AssertionError(bad)
