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
was), and so is any one item, kept or not (ijson builds an item whole before it is dropped); what passes by
costs no memory beyond one item.

ijson differs from the decoder the bridge uses everywhere else (`bridge.perf.jsonload.lenient_loads`, the
stdlib's result) on a few hostile inputs: it refuses NaN/Infinity, integers beyond 64 bits, bad UTF-8 and
raw control characters (an error), and turns a real escape of a lone surrogate into "?" (silently; a pair,
and text that only looks like an escape after an escaped backslash, it reads as the stdlib does). Every such
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

# A real escape of a UTF-16 surrogate (\uD800-\uDFFF): an even run of backslashes (escaped backslashes)
# before `\u` (an odd run ends in the escape's own). A high one followed by a low one is a pair, which
# ijson decodes as the stdlib does; a lone one it turns into "?".
_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD]([89a-fA-F])[0-9a-fA-F]{2}")
# What every such escape contains: a plain search (a literal prefix, fast) finds out whether the scan above,
# whose look-behind is tried at every byte, has anything to find at all (almost never: the serve writes
# every character but a lone surrogate as it is).
_CANDIDATE = re.compile(rb"\\u[dD][89a-fA-F]")
_MAX_TAIL = 64 * 1024  # a run of backslashes longer than this at a chunk's end: read the stdlib's way


def lone_surrogate(buf: bytes, *, final: bool) -> tuple[bool, int]:
    """(whether `buf` has a real escape of a lone surrogate, where to scan again with the next chunk): an
    escape cut at the end, or a high one whose next six bytes are not here yet (not `final`), is looked at
    again with what follows, from the start of the backslashes before it (their parity decides)."""
    pair_end = -1
    for m in _SURROGATE.finditer(buf) if _CANDIDATE.search(buf) is not None else ():
        start = m.end() - 6
        if m.group(1) in b"89abAB":  # high: a pair only if a low escape follows at once
            nxt = buf[m.end():m.end() + 6]
            if len(nxt) < 6 and not final:
                return False, m.start()
            if len(nxt) == 6 and nxt[:3] in (b"\\ud", b"\\uD") and nxt[3:4] in b"cdefCDEF" \
                    and all(c in b"0123456789abcdefABCDEF" for c in nxt[4:6]):
                pair_end = m.end() + 6
                continue
            return True, 0
        if start + 6 != pair_end:  # a low escape that is not the second half of a pair
            return True, 0
    if final:
        return False, len(buf)
    k = buf.rfind(b"\\", max(0, len(buf) - 5))  # an escape cut by the chunk's end: `\`, `\u`, … `\uD83`
    if k < 0:
        return False, len(buf)
    while k > 0 and buf[k - 1:k] == b"\\":
        k -= 1
    return False, k


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
        self._unfinished = 0  # bytes fed since an item last completed: one item is bounded too
        self._events = ijson.sendable_list()
        self._coro = ijson.items_coro(self._events, "item", use_float=True)
        self.answer = SyncAnswer()

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._check_surrogates(self._tail + chunk, final=False)
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
        if self._take():
            self._unfinished = 0
        else:
            self._unfinished += len(chunk)
            if self._unfinished > self._max_kept:  # one item larger than the bound, kept or not
                raise BodyTooLarge(f"{self._what}: an item exceeds the bound of {self._max_kept} bytes",
                                   self._max_kept)

    def _check_surrogates(self, buf: bytes, *, final: bool) -> None:
        lone, again = lone_surrogate(buf, final=final)
        if lone:
            raise NotStreamable("escaped lone surrogate")
        if len(buf) - again > _MAX_TAIL:
            raise NotStreamable("a run of backslashes across chunks")
        self._tail = buf[again:]

    def close(self) -> SyncAnswer:
        self._check_surrogates(self._tail, final=True)
        try:
            self._coro.close()
        except ijson.JSONError as e:
            raise NotStreamable(str(e)[:200]) from None
        self._take()
        if not self._started:
            raise NotStreamable("empty body")
        return self.answer

    def _take(self) -> bool:
        """Note and keep or drop the items completed so far; True if there were any."""
        a = self.answer
        if not self._events:
            return False
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
        return True

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
