"""The prompt queue's port contract (bridge.store.ports.prompt_queue, docs/ports.md, docs/commands.md "The
legacy queue", "The send claim"), run on PostgreSQL and on the in-memory twin alike: runtimes of stored
turns, rows moved only from the states given, each session's queue in order, dropping, and the send claim
(one sender at a time, taken over once it aged past the window)."""

from __future__ import annotations

from bridge.commands.legacy_delivery import CLAIM_WINDOW_S, DROPPED, PENDING, QUEUED, SENDING, ClaimAction
from bridge.commands.model import Command
from bridge.store.ports import CommandKey
from tests.support.store_ports import Backend, Event

OWNER = "host-a:1:aaaa"


async def new_prompt(backend: Backend, command_id: str, session_id: str = "ses_q", *,
                     queued: bool = True) -> CommandKey:
    cmd = Command("prompt", command_id, session_id, {"text": command_id})
    await backend.commands().claim(cmd, "alice", "prompt", None, session_id)
    key = CommandKey.of(cmd, "alice")
    if queued:
        assert await backend.queue().move(key, (PENDING,), QUEUED, http_status=200,
                                          result={"command_id": command_id, "state": QUEUED})
    return key


async def test_the_runtimes_of_the_stored_turns(backend: Backend) -> None:
    queue = backend.queue()
    none = await queue.turn_history("ses_q")
    assert (none.latest, none.seen) == (None, frozenset())
    epoch, _ = await backend.leases().claim("ses_q", OWNER)
    await backend.store_events("ses_q", epoch, [Event(1, "prompt:admitted", "message.updated")])
    legacy = await queue.turn_history("ses_q")
    assert (legacy.latest, legacy.seen) == ("legacy", frozenset({"legacy"}))
    await backend.store_events("ses_q", epoch, [Event(2, "text:end"),
                                                Event(3, "prompt:admitted", "session.next.prompt.admitted")])
    both = await queue.turn_history("ses_q")
    assert (both.latest, both.seen) == ("v2", frozenset({"legacy", "v2"}))
    assert not await queue.session_deleted("ses_q")
    await backend.leases().mark_deleted("ses_q")
    assert await queue.session_deleted("ses_q")
    assert not await queue.session_deleted("ses_unknown")


async def test_a_row_moves_only_from_the_states_given(backend: Backend) -> None:
    queue = backend.queue()
    key = await new_prompt(backend, "c-1", queued=False)
    assert not await queue.move(key, (QUEUED,), SENDING)
    assert await queue.move(key, (PENDING,), PENDING, runtime="legacy")
    row = await queue.row(key)
    assert row is not None and (row.state, row.runtime, row.key) == (PENDING, "legacy", key)
    assert not await queue.move(CommandKey("alice", "ses_q", "c-none"), (PENDING,), QUEUED)
    assert await queue.row(CommandKey("alice", "ses_q", "c-none")) is None


async def test_each_sessions_head_is_its_oldest_waiting_prompt(backend: Backend) -> None:
    queue = backend.queue()
    a2 = await new_prompt(backend, "z-first", "ses_a")  # created first: ahead whatever its id
    a1 = await new_prompt(backend, "a-second", "ses_a")
    b1 = await new_prompt(backend, "b-only", "ses_b")
    await new_prompt(backend, "not-queued", "ses_c", queued=False)
    assert [r.command_id for r in await queue.heads()] == ["z-first", "b-only"]
    assert [r.command_id for r in await queue.heads(limit=1)] == ["z-first"]
    assert await queue.queued_ahead("ses_a", a1) == 1 and await queue.queued_ahead("ses_b", b1) == 0
    assert await queue.move(a2, (QUEUED,), SENDING)  # being sent after waiting: still the head
    assert [r.command_id for r in await queue.heads()] == ["z-first", "b-only"]
    steer = await new_prompt(backend, "steer", "ses_b", queued=False)
    assert await queue.move(steer, (PENDING,), SENDING, result={"state": "sending"})  # a steer: not queued
    assert await queue.queued_ahead("ses_b", b1) == 0


async def test_dropping_moves_every_queued_prompt_of_the_session(backend: Backend) -> None:
    queue = backend.queue()
    k1, k2 = await new_prompt(backend, "c-1"), await new_prompt(backend, "c-2")
    other = await new_prompt(backend, "c-3", "ses_other")
    assert sorted(await queue.drop_queued("ses_q", "session deleted")) == ["c-1", "c-2"]
    for key in (k1, k2):
        row = await queue.row(key)
        assert row is not None and (row.state, row.http_status) == (DROPPED, 200)
        assert row.result == {"command_id": key.command_id, "state": DROPPED, "reason": "session deleted"}
    kept = await queue.row(other)
    assert kept is not None and kept.state == QUEUED
    assert await queue.drop_queued("ses_q", "again") == []


async def test_one_sender_holds_the_claim_until_it_ages_out(backend: Backend) -> None:
    queue = backend.queue()
    key = await new_prompt(backend, "c-1")
    action, before = await queue.claim(key, "t-1")
    assert action is ClaimAction.TAKE and before is not None and before.state == QUEUED
    row = await backend.command(key)
    assert row is not None and (row["state"], row["runtime"], row["send_token"]) == (SENDING, "legacy", "t-1")
    assert (await queue.claim(key, "t-2"))[0] is ClaimAction.HELD
    assert await queue.renew(key, "t-1") and not await queue.renew(key, "t-2")
    assert (await queue.claim(key, "t-1"))[0] is ClaimAction.TAKE  # its own
    await backend.age_send_claim(key, CLAIM_WINDOW_S + 1)
    assert not await queue.renew(key, "t-1")  # aged out: nobody may assume it still holds it
    assert (await queue.claim(key, "t-2"))[0] is ClaimAction.TAKE
    assert (await queue.claim(key, "t-1"))[0] is ClaimAction.HELD


async def test_a_release_lets_only_the_tokens_own_claim_go(backend: Backend) -> None:
    queue = backend.queue()
    key = await new_prompt(backend, "c-1")
    await queue.claim(key, "t-1")
    await queue.release(key, "t-2")
    assert (await backend.command(key) or {})["send_token"] == "t-1"
    await queue.release(key, "t-1")
    row = await backend.command(key)
    assert row is not None and (row["state"], row["send_token"]) == (SENDING, None)
    assert (await queue.claim(key, "t-2"))[0] is ClaimAction.TAKE  # nobody holds it: the next one takes it


async def test_a_final_row_answers_what_is_stored_and_an_unknown_one_is_held(backend: Backend) -> None:
    queue = backend.queue()
    key = await new_prompt(backend, "c-1")
    assert await queue.move(key, (QUEUED,), "done", http_status=200, result={"state": "sent"})
    action, row = await queue.claim(key, "t-1")
    assert action is ClaimAction.ANSWER_STORED and row is not None and row.result == {"state": "sent"}
    assert await queue.claim(CommandKey("alice", "ses_q", "c-none"), "t-1") == (ClaimAction.HELD, None)
