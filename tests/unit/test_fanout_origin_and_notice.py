from __future__ import annotations

from bridge.http.ws import origin_allowed
from bridge.store.fanout import CommitNotice, notice_payload, parse_notice


def test_origin_rules() -> None:
    allowed = frozenset({"https://chat.example"})
    assert origin_allowed(None, "bridge:8765", allowed)  # not a browser
    assert origin_allowed("http://bridge:8765", "bridge:8765", allowed)  # the viewer
    assert origin_allowed("https://chat.example", "bridge:8765", allowed)
    assert not origin_allowed("https://evil.example", "bridge:8765", allowed)
    assert not origin_allowed("null", "bridge:8765", frozenset())
    assert origin_allowed("https://any.example", "bridge:8765", frozenset({"*"}))


def test_commit_notices_round_trip_even_with_a_pipe_in_the_upstream_name() -> None:
    assert parse_notice(notice_payload("a|b:1", "ses_X", 42)) == CommitNotice("a|b:1", "ses_X", 42)
    assert parse_notice("garbage") is None
    assert parse_notice("u|ses|x") is None
