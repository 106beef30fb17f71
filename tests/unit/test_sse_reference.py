"""The SSE parser's whole-chunk framing (its inline `data:` and blank lines) against a line-by-line reading of
the WHATWG rules written here as plainly as the spec says them: the same items for any input and chunking."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.upstream.sse import SSEComment, SSEEvent, SSEItem, SSEParser

CAPTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33").glob("*/*.sse"))


def reference(body: bytes) -> list[SSEItem]:
    """https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation, one line at
    a time; comments kept and `retry` reported per frame as bridge.upstream.sse documents."""
    text = body.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines.pop()  # the unterminated tail (or "" after the last line end): never processed
    out: list[SSEItem] = []
    data: list[str] = []
    event, last_id, retry = "", None, None
    for line in lines:
        if line == "":
            if data:
                out.append(SSEEvent("\n".join(data), event or "message", last_id, retry))
            data, event, retry = [], "", None
            continue
        if line.startswith(":"):
            out.append(SSEComment(line[1:].removeprefix(" ")))
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit() and len(value.lstrip("0")) <= 12:
            retry = int(value)
    return out


def chunked(body: bytes, cuts: list[int]) -> list[SSEItem]:
    parser = SSEParser()
    items: list[SSEItem] = []
    for a, b in pairwise([0, *sorted(cuts), len(body)]):
        items += parser.feed(body[a:b])
    return items + parser.close()


_pieces = st.sampled_from([
    b"data: {\"a\":1}\n", b"data:x\n", b"data: \n", b"data\n", b"data:  two spaces\n", b"\n", b"\r\n", b"\r",
    b": heartbeat\n", b":\n", b"event: e\n", b"event:\n", b"id: 7\n", b"id: a\x00b\n", b"retry: 50\n", b"retry: x\n",
    b"data: \xc3\xa9\xe2\x82\xac\r\n", b"\xef\xbb\xbf", b"\xff", b"dat", b"a: y\n", b"other: z\n",
])


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(_pieces, max_size=40).map(b"".join), st.binary(max_size=300)),
       st.lists(st.integers(0, 400), max_size=10))
def test_any_stream_any_chunking_gives_what_the_spec_reading_gives(body: bytes, cuts: list[int]) -> None:
    cuts = [c for c in cuts if c <= len(body)]
    assert chunked(body, cuts) == reference(body)


def test_every_capture_whole_and_in_small_chunks_gives_what_the_spec_reading_gives() -> None:
    assert CAPTURES
    for path in CAPTURES:
        body = path.read_bytes()
        want = reference(body)
        assert chunked(body, []) == want, path
        assert chunked(body, list(range(0, len(body), 97))) == want, path
