"""A `POST /sync/history` answer read as it arrives, item by item, keeping only what was asked for (pure;
no I/O: the client feeds it the body's chunks; docs/mirror.md "What a repair costs").

An answer holds the whole log of every session the body does not name (docs/upstream.md §14), so beyond
~1,000 sessions on the serve it is the serve's whole history, tens or hundreds of megabytes. Decoded
whole, one such answer was the daemon's largest allocation, and the high-water mark it left was most of
its resident memory. Here the array is parsed incrementally (ijson's C backend): each item is looked at
once, its aggregate and seq noted (`seen`: the highest seq of every aggregate, which keeps the client's
choice of names up to date), and dropped unless its aggregate is one the call asked for and its seq is above
the cursor it was asked from (`keep`: session → cursor; an item without an integer seq is kept, for its
session to reject). What is kept is bounded by `max_kept_bytes` (`BodyTooLarge`, as the whole-body read
was); what passes by costs no memory beyond one item.

ijson differs from the decoder the bridge uses everywhere else (`bridge.perf.jsonload.lenient_loads`, the
stdlib's result) on a few hostile inputs: it refuses NaN/Infinity, integers beyond 64 bits, bad UTF-8 and
raw control characters (an error), and turns an escaped lone surrogate into "?" (silently). Every such
input raises `NotStreamable`, and the caller reads that answer the old way (whole, bounded, decoded by
the stdlib: the same values as before, item rejects and all). A kept item that orjson cannot encode
(nested beyond its depth limit) does the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ijson  # type: ignore[import-untyped]
import orjson

from bridge.errors import BodyTooLarge

# An escaped UTF-16 surrogate (\uD800-\uDFFF): a pair is fine for ijson, a lone one is not; both go the
# stdlib's way (rare: an emoji escaped as a pair; the serve writes UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_TAIL = 5  # bytes of a chunk kept to find an escape cut between two chunks


class NotStreamable(Exception):
    """The answer has something only the stdlib decoder reads as the rest of the bridge does."""


@dataclass
class SyncAnswer:
    """The kept items in the answer's order, the highest seq of every aggregate, and counts."""

    items: list[Any] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    answered: int = 0  # items in the answer
    bytes: int = 0  # bytes of the answer


class SyncAnswerReader:
    def __init__(self, keep: Mapping[str, int], *, max_kept_bytes: int, what: str = "POST /sync/history") -> None:
        self._keep = keep
        self._max_kept = max_kept_bytes
        self._what = what
        self._kept_bytes = 0
        self._tail = b""
        self._started = False  # the first byte that is not white space was seen (it must open the array)
        self._events = ijson.sendable_list()
        self._coro = ijson.items_coro(self._events, "item", use_float=True)
        self.answer = SyncAnswer()

    def feed(self, chunk: bytes) -> None:
        if _SURROGATE_ESCAPE.search(self._tail + chunk[: _TAIL + 1]) or _SURROGATE_ESCAPE.search(chunk):
            raise NotStreamable("escaped surrogate")
        self._tail = chunk[-_TAIL:]
        self.answer.bytes += len(chunk)
        if not self._started:
            head = chunk.lstrip(b" \t\r\n")
            if head:
                self._started = True
                if head[:1] != b"[":  # not an array: the stdlib's read says what it is
                    raise NotStreamable("answer is not a JSON array")
        try:
            self._coro.send(chunk)
        except ijson.JSONError as e:
            raise NotStreamable(str(e)[:200]) from None
        self._take()

    def close(self) -> SyncAnswer:
        try:
            self._coro.close()
        except ijson.JSONError as e:
            raise NotStreamable(str(e)[:200]) from None
        self._take()
        if not self._started:
            raise NotStreamable("empty body")
        return self.answer

    def _take(self) -> None:
        a = self.answer
        seen = a.seen
        for item in self._events:
            a.answered += 1
            agg = item.get("aggregate_id") if isinstance(item, dict) else None
            if isinstance(agg, str):
                seq = item.get("seq")
                if type(seq) is int and seq > seen.get(agg, -1):
                    seen[agg] = seq
                after = self._keep.get(agg)
                if after is None or (type(seq) is int and seq <= after):
                    continue
            self._kept(item)
        del self._events[:]

    def _kept(self, item: Any) -> None:
        try:
            size = len(orjson.dumps(item))
        except (TypeError, orjson.JSONEncodeError) as e:  # deeper than orjson encodes: the stdlib's way
            raise NotStreamable(f"kept item not encodable: {e}") from None
        self._kept_bytes += size
        if self._kept_bytes > self._max_kept:
            raise BodyTooLarge(f"{self._what}: the asked sessions' part exceeds the bound of {self._max_kept} bytes",
                               self._max_kept)
        self.answer.items.append(item)


def whole_answer(items: list[Any], keep: Mapping[str, int], size: int) -> SyncAnswer:
    """The same `SyncAnswer` from an answer decoded whole (the stdlib's way, for what ijson cannot read)."""
    out = SyncAnswer(answered=len(items), bytes=size)
    seen = out.seen
    for item in items:
        agg = item.get("aggregate_id") if isinstance(item, dict) else None
        if isinstance(agg, str):
            seq = item.get("seq")
            if type(seq) is int and seq > seen.get(agg, -1):
                seen[agg] = seq
            after = keep.get(agg)
            if after is None or (type(seq) is int and seq <= after):
                continue
        out.items.append(item)
    return out
