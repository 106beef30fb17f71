"""The look at a `/global/event` frame before decoding it (bridge.events.global_peek), against every frame of
the captures of the real serve: it may only skip work, never change an outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.events.global_peek import SKIP, DurableTwin, peek

FIXTURES = Path("fixtures/opencode-1.18.33")
CAPTURES = sorted(FIXTURES.glob("*/global.sse"))


def _frames(path: Path) -> list[str]:
    return [line[6:] for line in path.read_text().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.parent.name)
def test_every_captured_frame_is_peeked_exactly_like_its_decoding(path: Path) -> None:
    frames = _frames(path)
    assert frames
    for data in frames:
        got = peek(data)
        frame = json.loads(data)
        payload = frame["payload"]
        if payload.get("type") == "sync":
            ev = payload["syncEvent"]
            name = ev["type"].rsplit(".", 1)[0]
            if name.startswith("session.next."):
                assert got == DurableTwin(ev["aggregateID"], ev["seq"], name, frame.get("directory")), data[:200]
            else:
                assert got is None, data[:200]
        elif payload.get("type", "").startswith("session.next.") and not payload["type"].endswith(".delta"):
            assert got == SKIP, data[:200]
        else:
            assert got is None, data[:200]  # deltas, legacy events, statuses, heartbeats: decoded


def test_the_captures_hold_both_kinds() -> None:
    seen = {type(peek(d)).__name__ if peek(d) != SKIP else "skip" for p in CAPTURES for d in _frames(p)}
    assert {"DurableTwin", "skip", "NoneType"} <= seen


@pytest.mark.parametrize("data", [
    # another key order, an escaped id, a delta, a bad seq, a non-session aggregate
    '{"payload":{"type":"session.next.text.ended","id":"evt_1","properties":{}}}',
    '{"payload":{"id":"evt_\\u0031","type":"session.next.text.ended","properties":{}}}',
    '{"payload":{"id":"evt_1","type":"session.next.text.delta","properties":{}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"session.next.text.delta.1","seq":3,'
    '"aggregateID":"ses_A","data":{}}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"session.next.text.ended.1","seq":-3,'
    '"aggregateID":"ses_A","data":{}}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"session.next.text.ended.1","seq":1e3,'
    '"aggregateID":"ses_A","data":{}}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"session.next.text.ended.1",'
    '"seq":12345678901234567890,"aggregateID":"ses_A","data":{}}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"session.updated.1","seq":3,'
    '"aggregateID":"ses_A","data":{}}}}',
    '{"payload":{"id":"evt_1","type":"message.part.updated","properties":{}}}',
    'not json',
])
def test_anything_else_is_left_to_the_decoder(data: str) -> None:
    assert peek(data) is None


def test_a_directory_with_escapes_is_decoded_and_one_with_nul_dropped() -> None:
    twin = ('{"directory":"/srv/\\"q\\"/\\u00e9","project":"p1","payload":{"type":"sync","syncEvent":{"id":"evt_1",'
            '"type":"session.next.step.ended.2","seq":7,"aggregateID":"ses_A","data":{}}}}')
    assert peek(twin) == DurableTwin("ses_A", 7, "session.next.step.ended", '/srv/"q"/é')
    nul = twin.replace("\\u00e9", "\\u0000")
    looked = peek(nul)
    assert isinstance(looked, DurableTwin) and looked.directory is None
