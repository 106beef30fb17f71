"""`opencode-bridge map FILE`: print the normalized view of a captured stream, offline.

FILE is one of (detected from its content, not its name):
- an SSE body: the durable stream, `/api/event`, or `/global/event` (frames with a `payload`; each line
  then also says its `directory` and whether it is a sync `twin`);
- a sync log: the JSON array `POST /sync/history` answers (or a captured exchange whose response body
  is one).

Legacy-driven turns are mapped like v2 turns (`bridge.events.legacy`, one state per session, in file order).
Nothing is hidden: noise, `server.connected` and bad frames get a line each, so the output can be
diffed against the capture. Comments (`: heartbeat`) are not events and are not printed.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, TextIO

from bridge.events import BadFrame, Envelope, parse_envelope, to_json
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.syncframes import decode_json, parse_global_object, parse_sync_log
from bridge.upstream.sse import FrameTooLarge, SSEEvent, SSEItem, SSEParser


class _Mapper:
    """One legacy state per session, as the follower keeps it."""

    def __init__(self) -> None:
        self._states: defaultdict[str | None, LegacyTurnState] = defaultdict(LegacyTurnState)

    def view(self, env: Envelope) -> dict[str, Any]:
        return to_json(normalize_legacy(env, self._states[env.session_id]))


def _bad(exc: BadFrame) -> dict[str, Any]:
    return {"kind": "bad_frame", "reason": exc.reason, "detail": exc.detail}


def map_stream(body: bytes) -> Iterator[dict[str, Any]]:
    """The JSON view of every event of one captured SSE body, in order."""
    parser = SSEParser()
    mapper = _Mapper()
    try:
        items = parser.feed(body)
    except FrameTooLarge as exc:
        yield from _map_items(exc.events, mapper)
        yield {"kind": "bad_frame", "reason": "frame_too_large", "detail": str(exc)}
        return
    items.extend(parser.close())
    yield from _map_items(items, mapper)


def _map_items(items: list[SSEItem], mapper: _Mapper) -> Iterator[dict[str, Any]]:
    for item in items:
        if not isinstance(item, SSEEvent):
            continue
        try:
            yield _map_frame(item.data, mapper)
        except BadFrame as exc:
            yield _bad(exc)


def _map_frame(data: str, mapper: _Mapper) -> dict[str, Any]:
    obj = decode_json(data)
    if isinstance(obj, dict) and "payload" in obj:  # a /global/event frame
        frame = parse_global_object(obj)
        return {**mapper.view(frame.envelope), "directory": frame.directory, "twin": frame.twin}
    return mapper.view(parse_envelope(obj))


def map_sync_log(body: object) -> Iterator[dict[str, Any]]:
    """The JSON view of every item of a `/sync/history` answer (or of a captured exchange of one)."""
    if isinstance(body, dict) and isinstance(body.get("response"), dict):
        body = body["response"].get("body")
    mapper = _Mapper()
    for item in parse_sync_log(body):
        yield _bad(item) if isinstance(item, BadFrame) else mapper.view(item)


def _views(body: bytes) -> Iterator[dict[str, Any]]:
    if body.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{"):
        return map_sync_log(decode_json(body))
    return map_stream(body)


def run_map(path: str, out: TextIO) -> int:
    try:
        with open(path, "rb") as f:
            body = f.read()
    except OSError as exc:
        print(f"opencode-bridge map: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    bad = 0
    try:
        for view in _views(body):
            bad += view["kind"] == "bad_frame"
            out.write(json.dumps(view, ensure_ascii=False, separators=(",", ":")) + "\n")
    except BadFrame as exc:  # JSON that is not a sync log at all
        print(f"opencode-bridge map: {path} is neither an SSE capture nor a sync log: {exc}", file=sys.stderr)
        return 1
    if bad:
        print(f"opencode-bridge map: {bad} bad frame(s)", file=sys.stderr)
    return 0
