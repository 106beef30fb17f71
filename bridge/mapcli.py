"""`opencode-bridge map FILE.sse`: print the normalized view of a captured stream, offline.

Nothing is hidden: noise, `server.connected` and bad frames get a line each, so the output can be
diffed against the capture. Comments (`: heartbeat`) are not events and are not printed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from bridge.events import BadFrame, normalize, parse_frame, to_json
from bridge.upstream.sse import SSEEvent, SSEFrameTooLarge, SSEItem, SSEParser


def map_stream(body: bytes) -> Iterator[dict[str, Any]]:
    """The JSON view of every event of one captured SSE body, in order."""
    parser = SSEParser()
    try:
        items = parser.feed(body)
    except SSEFrameTooLarge as exc:
        items = exc.events
        yield from _map_items(items)
        yield {"kind": "bad_frame", "reason": "frame_too_large", "detail": str(exc)}
        return
    items.extend(parser.close())
    yield from _map_items(items)


def _map_items(items: list[SSEItem]) -> Iterator[dict[str, Any]]:
    for item in items:
        if not isinstance(item, SSEEvent):
            continue
        try:
            env = parse_frame(item.data)
        except BadFrame as exc:
            yield {"kind": "bad_frame", "reason": exc.reason, "detail": exc.detail}
            continue
        yield to_json(normalize(env))


def run_map(path: str, out: TextIO) -> int:
    try:
        with open(path, "rb") as f:
            body = f.read()
    except OSError as exc:
        print(f"opencode-bridge map: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    bad = 0
    for view in map_stream(body):
        bad += view["kind"] == "bad_frame"
        out.write(json.dumps(view, ensure_ascii=False, separators=(",", ":")) + "\n")
    if bad:
        print(f"opencode-bridge map: {bad} bad frame(s)", file=sys.stderr)
    return 0
