"""Operators' view of the pending requests (bridge.ops.pending, the doctor check): counts and the oldest
age by kind, and the listing, oldest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bridge.events.question import QuestionUpdate
from bridge.ops.doctor import pending_check
from bridge.ops.pending import PendingGauges, summarize
from bridge.store.commands_pending import StoredRequest
from bridge.store.memory import MemoryPendingStore
from tests.support.metric_values import sample

NOW = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def req(kind: str, rid: str, minutes: float | None) -> StoredRequest:
    asked = None if minutes is None else NOW - timedelta(minutes=minutes)
    return StoredRequest(kind, "ses_a", rid, "legacy", None, asked, None, None, None, None)


def test_counts_and_the_oldest_age_by_kind_every_kind_present() -> None:
    rows = [req("question", "que_1", 90), req("question", "que_2", 5), req("permission", "per_1", None)]
    assert summarize(rows, NOW) == {"question": (2, 5400.0), "permission": (1, 0.0)}
    assert summarize([], NOW) == {"question": (0, 0.0), "permission": (0, 0.0)}


def test_doctor_lists_what_waits_and_says_none_otherwise() -> None:
    assert pending_check([], NOW).detail == "none"
    check = pending_check([req("question", "que_1", 90)] * 12, NOW)
    assert check.ok and check.detail.startswith("12 waiting for an answer: question que_1 of ses_a (legacy), "
                                                "pending 1.5 h")
    assert check.detail.endswith("and 2 more")


async def test_the_gauges_count_what_the_store_has_pending() -> None:
    store = MemoryPendingStore()  # the pending requests' in-memory twin (bridge.store.memory)
    await store.permission_asked("ses_a", "per_1", {}, NOW - timedelta(minutes=2), "bash", None, None)
    await store.permission_asked("ses_a", "per_2", {}, NOW - timedelta(minutes=1), "bash", None, None)
    await store.permission_replied("ses_a", "per_2", {}, NOW, "once")
    await store.question(QuestionUpdate("ses_a", "que_1", "asked", "v2", {}), NOW - timedelta(minutes=30))
    await PendingGauges(store, clock=lambda: NOW).refresh()
    assert sample("bridge_pending_requests", kind="permission") == 1
    assert sample("bridge_pending_requests", kind="question") == 1
    assert sample("bridge_pending_request_oldest_seconds", kind="question") == 1800.0
