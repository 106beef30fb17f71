"""Delivering a prompt through the legacy runtime exactly once (docs/commands.md, "The legacy queue",
"Exactly once"), pure: the states of a legacy prompt row, when a queued one may go, and what to do when
a sender holds the row.

The legacy `prompt_async` takes a caller's `messageID` but is not idempotent (a repeat appends a second
text part, docs/upstream.md §17), and it has no queue (a prompt sent while a turn runs joins that turn at
its next step boundary, §19: that is `steer`). So the bridge keeps the row's state in the database and
looks upstream for the message before every send:

    pending ──(steer, or queue on an idle session)──────────────┐
    pending ──(queue while a turn runs, or prompts queued ahead)─→ queued ──(turn ended, FIFO)─┐
                                                                  ↓                            ↓
                                                               sending ──(message upstream)──→ done
    queued ──(interrupt with drop_queued, session deleted)──→ dropped

`sending` is committed before the upstream call: a row found in `sending` may have been sent by a
process that died before its commit, so the sender first waits a moment for the message to appear
upstream (`prompt_async` answers before the user message is stored) and sends only if it does not.

Only one sender at a time holds a row: its **send claim** (`send_token`, `send_claimed_at` by the
database's clock), taken by compare-and-set under the row lock (`claim_action`), renewed the same way
right before the upstream call (`holds_claim`; a sender that lost it sends nothing), and the call bounded
by SEND_TIMEOUT_S. Another sender takes a `sending` row only once its claim is CLAIM_WINDOW_S old, so
every send of the holder has ended by then (docs/commands.md, "Exactly once", "The send claim"). A claim
lives in the row, not in a connection: a dropped database connection cannot release it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

PENDING, QUEUED, SENDING, DONE, FAILED, DROPPED = "pending", "queued", "sending", "done", "failed", "dropped"
FINAL_STATES = frozenset({DONE, FAILED, DROPPED})

# How long a sender looks for the message of a row found in `sending` before it sends it again, and for
# the message of a prompt it has just sent before it calls it sent (`prompt_async` answers before the
# message is stored, and a serve killed in between loses it: the row then stays `sending`).
CONFIRM_WAIT_S = 3.0
# The send claim: the holder renews it right before the upstream call and bounds the call by SEND_TIMEOUT_S;
# another sender may take the row only once the claim is CLAIM_WINDOW_S old, when the holder's call has
# ended (sent or given up) for CLAIM_WINDOW_S - SEND_TIMEOUT_S already. A holder's look upstream (up to
# CONFIRM_WAIT_S) and the renewal take far less than the window, so the holder keeps its claim throughout.
CLAIM_WINDOW_S = 15.0
SEND_TIMEOUT_S = 8.0
# A retry whose row was lost (a failover) holds a newer time-stamped id with the same digest (docs/commands.md,
# "Exactly once"): the sender looks for that digest among the session's newest legacy messages.
RECENT_MESSAGES = 50
DIGEST_LEN = 14  # the command's digest ends every id derived from it (bridge.commands.model)
# A newest user message without a reply yet, on an idle session, older than this: its turn failed before
# any answer (a provider error): the turn is over all the same.
UNANSWERED_SETTLE_MS = 5_000


def first_state(runtime: str, delivery: str, busy: bool, queued_ahead: int) -> str:
    """The state a new prompt row takes once its runtime is known: a legacy `queue` waits for the running
    turn and for the prompts queued before it (FIFO); everything else is sent at once."""
    if runtime == "legacy" and delivery == "queue" and (busy or queued_ahead > 0):
        return QUEUED
    return PENDING


@dataclass(frozen=True)
class NewestMessage:
    """The newest message of a session in the legacy store (`GET /session/{id}/message?limit=1`)."""

    role: str
    completed: bool  # assistant: `time.completed` set (or an error); user: always False
    created_ms: int | None
    completed_ms: int | None = None


def turn_ended(busy: bool, newest: NewestMessage | None, now_ms: int) -> bool:
    """Whether a queued prompt may go: the legacy status is idle and the newest message is not a prompt
    that has not started its turn yet (the status reads idle for a moment between `prompt_async` and the
    turn's start, so it alone would let the next queued prompt run into this one). An answer left
    incomplete on an idle session (its turn was cut by a serve restart) does not hold the queue; neither
    does a prompt left unanswered for UNANSWERED_SETTLE_MS (its turn failed before any reply)."""
    if busy:
        return False
    if newest is None or newest.role != "user":
        return True
    return newest.created_ms is not None and now_ms - newest.created_ms >= UNANSWERED_SETTLE_MS


class SendAction(Enum):
    ANSWER_STORED = "answer_stored"  # the row is final already: answer from it
    RECORD_SENT = "record_sent"  # the message is upstream (an earlier attempt took it): only commit
    SEND = "send"


def send_action(state: str, message_exists: bool) -> SendAction:
    """What the sender holding a row does, given whether its message already exists upstream."""
    if state in FINAL_STATES:
        return SendAction.ANSWER_STORED
    return SendAction.RECORD_SENT if message_exists else SendAction.SEND


def confirm_wait_s(state: str) -> float:
    """How long to look for the row's message upstream before deciding: only a row found in `sending`
    (a send may have happened just before a crash) is worth waiting for."""
    return CONFIRM_WAIT_S if state == SENDING else 0.0


class ClaimAction(Enum):
    ANSWER_STORED = "answer_stored"  # final already: answer from the row
    TAKE = "take"  # the row is this sender's now
    HELD = "held"  # another sender holds a live claim: it will finish, or its claim will age out


def claim_action(state: str, holder: str | None, me: str, claim_age_s: float | None) -> ClaimAction:
    """Whether the sender `me` may take the row (set `sending`, its token, the claim time): a row not being
    sent yet, a `sending` row without a holder (left by an older bridge, or let go by an attempt that sent
    nothing), its own, or one whose claim has aged past CLAIM_WINDOW_S (its holder died, or its send has
    ended long ago). `claim_age_s`: database time since the claim (None: never claimed)."""
    if state in FINAL_STATES:
        return ClaimAction.ANSWER_STORED
    if state != SENDING or holder is None or holder == me:
        return ClaimAction.TAKE
    if claim_age_s is None or claim_age_s >= CLAIM_WINDOW_S:
        return ClaimAction.TAKE
    return ClaimAction.HELD


def holds_claim(state: str, holder: str | None, me: str, claim_age_s: float | None) -> bool:
    """Whether `me` still holds the row right before its upstream call (then it renews the claim): the row
    is `sending`, `me`'s, and the claim has not aged out (nobody may have taken it over)."""
    return (state == SENDING and holder == me and claim_age_s is not None
            and 0.0 <= claim_age_s < CLAIM_WINDOW_S)


def earlier_attempt(message_id: str, user_ids: list[str]) -> str | None:
    """The id of an earlier attempt of the same command among a session's user message ids: another id
    ending with the same digest (an 83-bit hash of upstream, session, subject and command id; a serve's own
    random suffix matches it with a chance of 2^-83). None when there is none."""
    if len(message_id) <= DIGEST_LEN:
        return None
    digest = message_id[-DIGEST_LEN:]
    return next((m for m in user_ids if m != message_id and m.endswith(digest)), None)
