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
Only one sender at a time holds a row (a database advisory lock, released by PostgreSQL if it dies).
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
