"""The send claim of a legacy prompt row (bridge.commands.legacy_delivery; docs/commands.md, "Exactly once",
"The send claim"): who may take a row, who may still send, and an earlier attempt's id found upstream."""

from __future__ import annotations

import itertools

import pytest

from bridge.commands.legacy_delivery import (
    CLAIM_WINDOW_S,
    CONFIRM_WAIT_S,
    DONE,
    DROPPED,
    FAILED,
    FINAL_STATES,
    PENDING,
    QUEUED,
    SEND_TIMEOUT_S,
    SENDING,
    ClaimAction,
    claim_action,
    earlier_attempt,
    holds_claim,
)
from bridge.commands.model import upstream_message_id, v2_prompt_message_id

STATES = (PENDING, QUEUED, SENDING, DONE, FAILED, DROPPED)
HOLDERS = (None, "me", "other")
AGES = (None, -1.0, 0.0, 1.0, CLAIM_WINDOW_S - 0.001, CLAIM_WINDOW_S, CLAIM_WINDOW_S + 60.0)


def test_the_window_outlasts_a_send_and_the_holders_own_looks() -> None:
    """The holder renews, sends for at most SEND_TIMEOUT_S and then looks CONFIRM_WAIT_S for its message: all
    inside the window, with time left over for the serve to store a message it has answered for."""
    assert SEND_TIMEOUT_S + CONFIRM_WAIT_S < CLAIM_WINDOW_S
    assert CLAIM_WINDOW_S - SEND_TIMEOUT_S >= 2 * CONFIRM_WAIT_S


@pytest.mark.parametrize(("state", "holder", "age"), list(itertools.product(STATES, HOLDERS, AGES)))
def test_claim_action_for_every_state_holder_and_age(state: str, holder: str | None, age: float | None) -> None:
    got = claim_action(state, holder, "me", age)
    if state in FINAL_STATES:
        assert got is ClaimAction.ANSWER_STORED
        return
    free = state in (PENDING, QUEUED)  # not being sent: whoever asks first takes it
    unheld = holder in (None, "me")  # left by an older bridge, or this attempt's own
    aged = age is None or age >= CLAIM_WINDOW_S  # the other holder's send ended long ago, or it died
    # otherwise another sender may be inside its send right now
    assert got is (ClaimAction.TAKE if free or unheld or aged else ClaimAction.HELD)


@pytest.mark.parametrize(("state", "holder", "age"), list(itertools.product(STATES, HOLDERS, AGES)))
def test_only_the_live_holder_of_a_sending_row_may_send(state: str, holder: str | None, age: float | None) -> None:
    expected = (state == SENDING and holder == "me" and age is not None and 0.0 <= age < CLAIM_WINDOW_S)
    assert holds_claim(state, holder, "me", age) is expected


def test_a_claim_is_never_taken_from_a_holder_that_may_still_send() -> None:
    """The fence in one line: whenever the holder may send, nobody else may take the row."""
    for state, age in itertools.product(STATES, AGES):
        if holds_claim(state, "me", "me", age):
            assert claim_action(state, "me", "other", age) is ClaimAction.HELD


def test_an_earlier_attempt_is_found_by_the_commands_digest() -> None:
    up, sid, cid = "local", "ses_dcf69c6a5ffeHQxvSA7FrlelcL", "c-42"
    first = upstream_message_id(up, sid, cid, 1796005680438, "alice")
    retry = upstream_message_id(up, sid, cid, 1796005683838, "alice")  # 3.4 s later, a new row
    other_cmd = upstream_message_id(up, sid, "c-43", 1796005680000, "alice")
    other_subject = upstream_message_id(up, sid, cid, 1796005680000, "bob")
    serves_own = "msg_22a47d535001o65INCu84jsLQJ"
    assert first != retry and first[-14:] == retry[-14:]
    assert earlier_attempt(retry, [serves_own, other_cmd, first]) == first
    assert earlier_attempt(retry, [serves_own, other_cmd, other_subject]) is None
    assert earlier_attempt(retry, [retry]) is None  # its own id is not an earlier attempt
    assert earlier_attempt(retry, []) is None
    assert earlier_attempt(v2_prompt_message_id(up, sid, cid, "alice"), [first]) == first  # same digest
    assert earlier_attempt("short", ["xshort"]) is None
