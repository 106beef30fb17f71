"""The pure core of prompts on both runtimes: runtime affinity, the legacy delivery states, attachments."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bridge.commands.affinity import (
    BASIS_HISTORY,
    BASIS_MIXED,
    BASIS_NEW,
    TurnHistory,
    choose_runtime,
    native_runtime,
    runtime_of_type,
    serve_major,
)
from bridge.commands.attachments import (
    MAX_FILES,
    AttachmentError,
    data_url_bytes,
    legacy_file_parts,
    parse_files,
    v2_files,
    v2_text,
)
from bridge.commands.legacy_delivery import (
    CONFIRM_WAIT_S,
    DONE,
    DROPPED,
    FAILED,
    PENDING,
    QUEUED,
    SENDING,
    UNANSWERED_SETTLE_MS,
    NewestMessage,
    SendAction,
    confirm_wait_s,
    first_state,
    send_action,
    turn_ended,
)
from bridge.commands.model import CommandError, parse_command

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"


# -- runtime affinity ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "major", "native"), [
    ("1.18.33", 1, "legacy"), ("2.0.0", 2, "v2"), ("v3.1", 3, "v2"), ("0.9", 0, "legacy"),
    (None, None, "legacy"), ("", None, "legacy"), ("beta", None, "legacy"),
])
def test_the_serve_version_gives_the_runtime_of_its_own_clients(version: str | None, major: int | None,
                                                                native: str) -> None:
    assert serve_major(version) == major
    assert native_runtime(version) == native


@pytest.mark.parametrize("setting", ["auto", "legacy", "v2"])
@pytest.mark.parametrize("latest", ["legacy", "v2"])
def test_a_session_with_turns_continues_in_its_runtime_whatever_the_setting(setting: str, latest: str) -> None:
    got = choose_runtime(TurnHistory(latest, frozenset({latest})), setting, "2.0.0")
    assert (got.runtime, got.basis, got.note) == (latest, BASIS_HISTORY, None)


def test_a_mixed_history_continues_in_the_latest_turns_runtime_and_says_so() -> None:
    got = choose_runtime(TurnHistory("v2", frozenset({"legacy", "v2"})), "auto", "1.18.33")
    assert (got.runtime, got.basis) == ("v2", BASIS_MIXED)
    assert got.note is not None and "legacy turns" in got.note


@pytest.mark.parametrize(("setting", "version", "runtime"), [
    ("auto", "1.18.33", "legacy"), ("auto", "2.1.0", "v2"), ("auto", None, "legacy"),
    ("legacy", "2.1.0", "legacy"), ("v2", "1.18.33", "v2"),
])
def test_a_session_without_a_turn_takes_the_serves_clients_runtime_or_the_setting(
        setting: str, version: str | None, runtime: str) -> None:
    got = choose_runtime(TurnHistory(), setting, version)
    assert (got.runtime, got.basis) == (runtime, BASIS_NEW)


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="prompt runtime"):
        choose_runtime(TurnHistory(), "both", None)


def test_the_runtime_of_a_stored_event_is_read_from_its_type() -> None:
    assert runtime_of_type("session.next.prompt.admitted") == "v2"
    assert runtime_of_type("message.part.updated") == "legacy"


# -- legacy delivery ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("runtime", "delivery", "busy", "ahead", "state"), [
    ("legacy", "queue", True, 0, QUEUED), ("legacy", "queue", False, 1, QUEUED),
    ("legacy", "queue", False, 0, PENDING), ("legacy", "steer", True, 3, PENDING),
    ("v2", "queue", True, 2, PENDING),  # the serve queues v2 prompts itself
])
def test_only_a_legacy_queue_behind_a_turn_or_a_queue_waits(runtime: str, delivery: str, busy: bool, ahead: int,
                                                            state: str) -> None:
    assert first_state(runtime, delivery, busy, ahead) == state


def test_a_turn_has_ended_when_idle_and_no_prompt_is_about_to_start_one() -> None:
    now = 1_000_000
    assert turn_ended(False, None, now)
    assert not turn_ended(True, None, now)
    assert not turn_ended(True, NewestMessage("assistant", False, now - 10), now)
    assert turn_ended(False, NewestMessage("assistant", True, now - 10, now - 5), now)
    # an answer a serve restart left incomplete does not hold the queue forever
    assert turn_ended(False, NewestMessage("assistant", False, now - 10), now)
    # a prompt just sent, not started yet: the status says idle for a moment
    assert not turn_ended(False, NewestMessage("user", False, now - 100), now)
    # a prompt left unanswered (its turn failed before any reply) does not hold the queue forever
    assert turn_ended(False, NewestMessage("user", False, now - UNANSWERED_SETTLE_MS), now)
    assert not turn_ended(False, NewestMessage("user", False, None), now)


@pytest.mark.parametrize("state", [DONE, FAILED, DROPPED])
def test_a_final_row_is_answered_from_the_store(state: str) -> None:
    assert send_action(state, False) is SendAction.ANSWER_STORED
    assert send_action(state, True) is SendAction.ANSWER_STORED


@pytest.mark.parametrize("state", [PENDING, QUEUED, SENDING])
def test_a_message_already_upstream_is_never_sent_again(state: str) -> None:
    assert send_action(state, True) is SendAction.RECORD_SENT
    assert send_action(state, False) is SendAction.SEND


def test_only_a_row_found_sending_waits_for_its_message() -> None:
    assert confirm_wait_s(SENDING) == CONFIRM_WAIT_S > 0
    assert confirm_wait_s(PENDING) == confirm_wait_s(QUEUED) == 0


# -- attachments --------------------------------------------------------------------------------------

def data_url(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"


def test_files_are_made_canonical() -> None:
    got = parse_files([{"path": "a.txt", "mime": "text/plain", "extra": 1},
                       {"url": data_url(b"png"), "mime": "image/png", "filename": "x.png"}])
    assert got == [{"path": "a.txt", "mime": "text/plain"},
                   {"url": data_url(b"png"), "mime": "image/png", "filename": "x.png"}]


@pytest.mark.parametrize(("files", "message"), [
    ("a.txt", "a list"),
    ([{"mime": "text/plain"}], "exactly one of path and url"),
    ([{"path": "a", "url": "data:,x", "mime": "text/plain"}], "exactly one"),
    ([{"path": "a"}], "mime"),
    ([{"path": "a", "mime": "application/zip"}], "images or text"),
    ([{"path": "", "mime": "text/plain"}], "path"),
    ([{"path": "a\x00b", "mime": "text/plain"}], "NUL"),
    ([{"url": "https://example.com/x.png", "mime": "image/png"}], "data: URL"),
    ([{"url": "data:image/png;base64,***", "mime": "image/png"}], "base64"),
    ([{"path": "a", "mime": "text/plain"}] * (MAX_FILES + 1), "at most"),
    ([{"url": data_url(b"x" * (6 * 1024 * 1024)), "mime": "image/png"}] * 2, "10 MiB"),
])
def test_bad_files_are_refused(files: object, message: str) -> None:
    with pytest.raises(AttachmentError, match=message):
        parse_files(files)


def test_a_prompt_with_bad_files_is_a_bad_request_and_no_files_keep_the_fingerprint() -> None:
    with pytest.raises(CommandError) as e:
        parse_command("prompt", {"command_id": "c", "text": "t", "delivery": "steer", "files": [{}]}, SID)
    assert e.value.code == "bad_request"
    plain = parse_command("prompt", {"command_id": "c", "text": "t", "delivery": "steer"}, SID)
    empty = parse_command("prompt", {"command_id": "c", "text": "t", "delivery": "steer", "files": []}, SID)
    assert plain.fingerprint == empty.fingerprint


def test_interrupt_may_drop_the_queue_only_when_asked() -> None:
    assert parse_command("interrupt", {"command_id": "i"}, SID).args == {}
    assert parse_command("interrupt", {"command_id": "i", "drop_queued": True}, SID).args == {"drop_queued": True}
    with pytest.raises(CommandError):
        parse_command("interrupt", {"command_id": "i", "drop_queued": "yes"}, SID)


def test_data_url_sizes() -> None:
    assert data_url_bytes(data_url(b"12345")) == 5
    assert data_url_bytes("data:text/plain,hello") == 5


def test_parts_are_what_opencodes_own_clients_send(tmp_path: Path) -> None:
    files = [{"path": "a b.txt", "mime": "text/plain"}, {"url": data_url(b"p"), "mime": "image/png"}]
    resolved = {"a b.txt": "/srv/proj/a b.txt"}
    assert legacy_file_parts(files, resolved) == [
        {"type": "file", "mime": "text/plain", "filename": "a b.txt", "url": "file:///srv/proj/a%20b.txt"},
        {"type": "file", "mime": "image/png", "filename": "attachment", "url": data_url(b"p")}]
    # v2: images as files, text files in the prompt's text (the v2 runtime sends every file as media)
    assert v2_files(files, resolved) == [{"uri": data_url(b"p"), "name": "attachment"}]
    got = v2_text("look", files, resolved, {0: "hello"})
    assert got == 'look\n\n<file name="a b.txt" path="/srv/proj/a b.txt">\nhello\n</file>'
