"""The latest todo list / diff summary kept per session (bridge.fanout.live_state): pure."""

from __future__ import annotations

import pytest

from bridge.fanout.frames import state_frame
from bridge.fanout.live_state import LiveSessionState, should_push

A, B, C = "ses_a", "ses_b", "ses_c"
TODO = [{"content": "x", "status": "pending", "priority": "low"}]


def test_unknown_is_none_and_a_put_says_whether_it_changed() -> None:
    kept = LiveSessionState()
    assert kept.get(A, "todo") is None
    assert kept.put(A, "todo", TODO) is True
    assert kept.put(A, "todo", list(TODO)) is False
    assert kept.get(A, "todo") == TODO and kept.get(A, "diff") is None
    assert kept.put(A, "todo", []) is True and kept.get(A, "todo") == []


def test_live_frames_are_kept_and_other_frames_ignored() -> None:
    kept = LiveSessionState()
    assert kept.apply(state_frame(A, "todo", TODO)) is True
    assert kept.apply(state_frame(A, "diff", [{"file": "f", "additions": 1, "deletions": 0, "status": None}]))
    assert kept.apply({"type": "session_error", "session": A}) is False
    assert kept.get(A, "todo") == TODO and len(kept.get(A, "diff") or []) == 1


def test_bounded_least_recently_touched_first_and_stale_after_a_reconnect() -> None:
    kept = LiveSessionState(max_sessions=2)
    kept.put(A, "todo", TODO)
    kept.put(B, "todo", TODO)
    kept.get(A, "todo")  # A touched: B is the oldest
    kept.put(C, "todo", TODO)
    assert kept.get(B, "todo") is None and kept.get(A, "todo") == TODO and len(kept) == 2
    assert kept.mark_stale() == {A, C}
    assert kept.get(A, "todo") is None and kept.last_told(A, "todo") == TODO  # not served, still known
    kept.put(A, "todo", [])
    assert kept.get(A, "todo") == [] and kept.get(C, "todo") is None and len(kept) == 2


def test_a_returned_list_is_a_copy_and_other_states_are_refused() -> None:
    kept = LiveSessionState()
    kept.put(A, "todo", TODO)
    got = kept.get(A, "todo")
    assert got is not None
    got.clear()
    assert kept.get(A, "todo") == TODO
    with pytest.raises(ValueError):
        kept.put(A, "status", [])


def test_a_re_read_list_is_pushed_when_it_is_news_or_a_page_just_came() -> None:
    assert should_push(None, TODO, False) and should_push([], TODO, False)
    assert not should_push(None, [], False) and not should_push(None, [], True)  # a first empty read: no news
    assert should_push(TODO, [], False)  # cleared while the stream was away
    assert not should_push(TODO, list(TODO), False) and should_push(TODO, list(TODO), True)
