"""The serve's reading rules, pure and written once: which sync-log items `POST /sync/history` answers,
which events a `/history` page holds (docs/upstream.md §3, §14). Every fake answers through these, whatever
its log is made of (dict items, or pre-encoded bytes beside their seqs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from tests.support.serve_model.frames import HISTORY_PAGE_MAX, MAX_NAMED, MAX_SEQ, Answer, bad_payload, too_many_named

T = TypeVar("T")
L = TypeVar("L")
WHOLE = -1  # the cutoff of a session the body does not name: its log from seq 0


def items_after(log: Sequence[dict[str, Any]], cutoff: int) -> list[dict[str, Any]]:
    """The items of a dict log after `cutoff`."""
    return [i for i in log if i["seq"] > cutoff]


def sync_answer(logs: Mapping[str, L], asked: Mapping[str, int],
                after: Callable[[L, int], Iterable[T]]) -> list[T]:
    """The sync rule: every session the body names after its cutoff, every other one whole (§14).
    `after(log, cutoff)` reads one log; sessions the serve does not know are not answered."""
    out: list[T] = []
    for sid, log in logs.items():
        out.extend(after(log, asked.get(sid, WHOLE)))
    return out


def check_sync_body(asked: object) -> Answer | None:
    """The serve's checks of a `/sync/history` body, in its order: an object of integer cutoffs in
    0..MAX_SEQ (400), then at most MAX_NAMED of them (500, SQLite's expression depth, §14)."""
    if not isinstance(asked, dict):
        return bad_payload("Expected an object")
    for sid, cut in asked.items():
        if type(cut) is not int or not 0 <= cut <= MAX_SEQ:
            return bad_payload(f'Expected an integer\n  at ["{sid}"]')
    if len(asked) > MAX_NAMED:
        return too_many_named()
    return None


def history_page(later: Sequence[T], limit: int) -> tuple[Sequence[T], bool]:
    """A `/history` page of the events after the cursor (in seq order): at most `limit`, capped at
    HISTORY_PAGE_MAX and at least one, and whether more follow."""
    page = later[: min(max(limit, 1), HISTORY_PAGE_MAX)]
    return page, len(page) < len(later)
