"""Incremental WHATWG `text/event-stream` parser: bytes in, events out, no I/O.

Follows https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation.
opencode only ever sends `data: <one-line JSON>` frames and `: heartbeat` comments (docs/upstream.md §2), but
the parser implements the whole grammar so that a proxy, a future upstream or a hostile peer cannot make
it misbehave: any byte sequence either yields events or raises `FrameTooLarge`.

Differences from a browser `EventSource`, on purpose:
- comments are returned (`SSEComment`) instead of dropped: `: heartbeat` on `/api/event` is the only
  liveness signal of that stream (docs/upstream.md §1, §5);
- `retry:` is reported on the event of its frame and as `SSEParser.retry`, instead of being applied;
- pending input is bounded by `max_frame_bytes`.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from bridge.errors import BadFrame
from bridge.perf.frozen import build as _build

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

_BOM = "\ufeff"
_utf8_decode = codecs.utf_8_decode
_MAX_RETRY_DIGITS = 12


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None  # the last event id in force at dispatch (it persists across frames)
    retry: int | None = None  # a valid `retry:` seen in this very frame


@dataclass(frozen=True)
class SSEComment:
    text: str


SSEItem = SSEEvent | SSEComment


class FrameTooLarge(BadFrame):
    """One pending SSE frame (or one unterminated line) outgrew `max_frame_bytes`.

    The parser is unusable afterwards: the caller must drop the connection and reconnect (for the
    durable stream with `after=<last stored seq>`, which loses nothing). `events` holds what was
    completed earlier in the same `feed()` call, so the caller may still consume it.
    """

    def __init__(self, limit: int, pending: int, events: list[SSEItem]) -> None:
        super().__init__("frame_too_large", f"pending SSE frame of {pending} chars exceeds the limit of {limit}")
        self.limit = limit
        self.pending = pending
        self.events = events


class SSEParser:
    """Feed raw body bytes in arbitrary chunks; get completed events and comments back.

    The size limit counts decoded characters (never more than the UTF-8 bytes they came from) of the
    unterminated line plus the `data` lines buffered for the current frame.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self.bytes_seen = 0
        self.retry: int | None = None  # the latest valid `retry:` value, like EventSource's reconnection time
        self._undecoded = b""  # the start of a UTF-8 sequence cut by the chunk's end (codecs' incremental decoder)
        self._started = False  # a leading BOM is stripped once, at the very start
        self._skip_lf = False  # the previous chunk ended in CR: an LF right after it is the same line end
        self._partial: list[str] = []  # pieces of the current unterminated line
        self._partial_len = 0
        self._data: list[str] = []
        self._data_len = 0
        self._event_type = ""
        self._frame_retry: int | None = None
        self._last_id: str | None = None
        self._failed = False
        self._closed = False

    @property
    def has_partial_frame(self) -> bool:
        """True while an unterminated line or an undispatched frame is buffered (lost if the stream ends)."""
        return bool(self._partial or self._data or self._event_type or self._frame_retry is not None)

    def feed(self, chunk: bytes) -> list[SSEItem]:
        if self._closed:
            raise RuntimeError("SSEParser.feed() after close()")
        if self._failed:
            raise FrameTooLarge(self.max_frame_bytes, self._data_len + self._partial_len, [])
        self.bytes_seen += len(chunk)
        if self._undecoded:
            chunk = self._undecoded + chunk
        text, used = _utf8_decode(chunk, "replace", False)
        self._undecoded = chunk[used:] if used < len(chunk) else b""
        return self._feed_text(text)

    def close(self) -> list[SSEItem]:
        """End of stream. A frame cut by EOF is discarded, as WHATWG requires, so this returns []."""
        if not self._closed:
            self._closed = True
            self._undecoded = b""
            self._partial.clear()
            self._partial_len = 0
            self._reset_frame()
        return []

    def _feed_text(self, text: str) -> list[SSEItem]:
        if not text:
            return []
        if not self._started:
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if not text:
            return []
        if "\n" not in text and "\r" not in text:
            # The common "middle of a long line" case: no joining, no scanning twice.
            self._partial.append(text)
            self._partial_len += len(text)
            self._check_size([])
            return []
        self._skip_lf = text.endswith("\r")
        if self._partial:
            self._partial.append(text)
            text = "".join(self._partial)
            self._partial.clear()
            self._partial_len = 0
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        tail = lines.pop()
        out: list[SSEItem] = []
        data = self._data
        for line in lines:
            # The two lines opencode sends, inline (one event per `data:` line and blank line, no call):
            # the general grammar below gives the same result for them.
            if not line:
                if data and not self._event_type and self._frame_retry is None:
                    out.append(_build(SSEEvent, {"data": "\n".join(data), "event": "message", "id": self._last_id,
                                                 "retry": None}))
                    data = self._data = []
                    self._data_len = 0
                    continue
            elif line.startswith("data: "):
                data.append(line[6:])
                self._data_len += len(line) - 5
                if self._data_len + self._partial_len > self.max_frame_bytes:
                    self._check_size(out)
                continue
            self._process_line(line, out)
            data = self._data
        if tail:
            self._partial.append(tail)
            self._partial_len = len(tail)
            self._check_size(out)
        return out

    def _process_line(self, line: str, out: list[SSEItem]) -> None:
        if not line:
            self._dispatch(out)
            return
        field, colon, value = line.partition(":")
        if not field and colon:
            out.append(SSEComment(value[1:] if value.startswith(" ") else value))
            return
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._data_len += len(value) + 1
            self._check_size(out)
        elif field == "event":
            self._event_type = value
        elif field == "id" and "\0" not in value:
            self._last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._set_retry(value)
        # Any other field name is ignored (WHATWG).

    def _set_retry(self, digits: str) -> None:
        digits = digits.lstrip("0") or "0"
        # int() refuses more than 4300 digits (ValueError); anything past ~30 years is not a reconnection
        # delay either, so such values are ignored like any other invalid retry.
        if len(digits) <= _MAX_RETRY_DIGITS:
            self._frame_retry = int(digits)
            self.retry = self._frame_retry

    def _dispatch(self, out: list[SSEItem]) -> None:
        if self._data:
            out.append(
                SSEEvent(
                    data="\n".join(self._data),
                    event=self._event_type or "message",
                    id=self._last_id,
                    retry=self._frame_retry,
                )
            )
        self._reset_frame()

    def _reset_frame(self) -> None:
        self._data = []
        self._data_len = 0
        self._event_type = ""
        self._frame_retry = None

    def _check_size(self, completed: list[SSEItem]) -> None:
        pending = self._data_len + self._partial_len
        if pending > self.max_frame_bytes:
            self._failed = True
            raise FrameTooLarge(self.max_frame_bytes, pending, completed)
