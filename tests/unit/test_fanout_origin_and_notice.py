from __future__ import annotations

from bridge.hosts import origin_allowed
from bridge.store.notices import (
    CommitNotice,
    StatusNotice,
    notice_payload,
    parse_notice,
    parse_status_notice,
    status_payload,
)


def test_origin_rules() -> None:
    allowed = frozenset({"https://chat.example"})
    assert origin_allowed(None, "bridge:8765", allowed)  # not a browser
    bridge = frozenset({"bridge"})  # BRIDGE_HTTP_HOST=bridge
    assert origin_allowed("http://bridge:8765", "bridge:8765", allowed, bridge)  # the viewer
    assert origin_allowed("http://127.0.0.1:8765", "127.0.0.1:8765", allowed)  # the viewer on loopback
    # DNS rebinding: evil.example resolved to the bridge; Origin and Host agree, but the Host is not ours.
    assert not origin_allowed("http://evil.example:8765", "evil.example:8765", allowed, bridge)
    assert origin_allowed("https://chat.example", "bridge:8765", allowed)
    assert not origin_allowed("https://evil.example", "bridge:8765", allowed)
    assert not origin_allowed("null", "bridge:8765", frozenset())
    assert origin_allowed("https://any.example", "bridge:8765", frozenset({"*"}))


def test_commit_notices_round_trip_even_with_a_pipe_in_the_upstream_name() -> None:
    assert parse_notice(notice_payload("a|b:1", "ses_X", 42)) == CommitNotice("a|b:1", "ses_X", 42)
    assert parse_notice("garbage") is None
    assert parse_notice("u|ses|x") is None


def test_status_notices_round_trip_and_anything_else_is_ignored() -> None:
    assert parse_status_notice(status_payload("a|b", "ses_X", "stalled", "no step", 7)) == StatusNotice(
        "a|b", "ses_X", "stalled", "no step", 7)
    assert parse_status_notice(status_payload("up", "ses_X", "idle", None, 0)) == StatusNotice(
        "up", "ses_X", "idle", None, 0)
    for bad in ("", "garbage", "[]", '{"upstream":"u","session":"s","status":"idle","version":true}',
                '{"upstream":"u","session":"","status":"idle","version":1}',
                '{"upstream":"u","session":"s","status":"idle","reason":3,"version":1}',
                '{"upstream":"u","session":"s","status":"idle","version":-1}'):
        assert parse_status_notice(bad) is None


def test_a_long_status_reason_is_cut_to_fit_a_notify_payload() -> None:
    payload = status_payload("up", "ses_X", "failed", "é" * 20_000, 1)
    assert len(payload.encode()) < 8000
    notice = parse_status_notice(payload)
    assert notice is not None and notice.reason is not None and notice.reason.endswith("…")
