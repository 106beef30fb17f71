"""bridge.command_service.legacy_prompts: a prompt sent through the legacy runtime exactly once — the row's
send claim, a look upstream for the message (its own id, or an earlier attempt's with the same digest)
before any send, the fence right before the call, the message seen stored, `done`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bridge.command_service.legacy_prompts import LegacyPrompts, legacy_body, prompt_result
from bridge.commands.legacy_delivery import CLAIM_WINDOW_S, DONE, PENDING, SENDING
from bridge.errors import UpstreamUnavailable
from bridge.store.commands_pending import CommandKey
from bridge.store.memory import MemoryPromptQueue
from tests.support.commands_twin import DIR, SID, UpstreamCommandsTwin
from tests.support.door_twins import add_prompt, announced, tables_on

KEY = CommandKey("alice", SID, "c1")
MID = "msg_0a1b2c3d4e5fAAAAAAAAAAAAAA"
EARLIER = "msg_000000000001AAAAAAAAAAAAAA"  # an earlier attempt: another time, the same digest


class Ticking:
    """A clock that moves a second per reading: waits for a condition end after a few looks."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def _door(state: str = PENDING) -> tuple[LegacyPrompts, MemoryPromptQueue, UpstreamCommandsTwin, Ticking]:
    clock, twin = Ticking(), UpstreamCommandsTwin()
    queue = MemoryPromptQueue(tables_on(clock))
    add_prompt(queue.tables, KEY, {"text": "hi", "delivery": "steer"}, state=state, upstream_id=MID,
               result={"command_id": "c1"})
    return LegacyPrompts(queue, twin, clock=clock), queue, twin, clock  # type: ignore[arg-type]


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _body(mid: str = MID) -> dict[str, object]:
    return {"messageID": mid, "parts": [{"type": "text", "text": "hi"}]}


async def test_a_new_prompt_is_sent_once_seen_stored_and_done() -> None:
    sender, queue, twin, _ = _door()
    status, answer = await sender.deliver(KEY, SID, DIR, _body(), {"command_id": "c1"})
    assert status == 200 and answer == {"command_id": "c1", "state": "sent", "message_id": MID}
    assert twin.count("legacy_prompt") == 1
    row = queue.tables.commands[KEY]
    assert row["state"] == DONE and row["result"] == answer and row["upstream_status"] == 204
    assert announced(queue.tables) == [("c1", "sent")]


async def test_a_message_already_upstream_is_not_sent_again() -> None:
    sender, queue, twin, _ = _door(SENDING)  # a sender died after its send
    twin.legacy_users[SID] = [{"info": {"id": MID, "role": "user"}, "parts": []}]
    status, answer = await sender.deliver(KEY, SID, DIR, _body(), {"command_id": "c1"})
    assert (status, answer["message_id"]) == (200, MID)
    assert twin.count("legacy_prompt") == 0 and queue.tables.commands[KEY]["state"] == DONE


async def test_an_earlier_attempts_message_is_taken_as_this_ones() -> None:
    sender, queue, twin, _ = _door()
    twin.legacy_users[SID] = [{"info": {"id": EARLIER, "role": "user"}, "parts": []}]
    _, answer = await sender.deliver(KEY, SID, DIR, _body(), {"command_id": "c1"})
    assert answer["message_id"] == EARLIER and twin.count("legacy_prompt") == 0
    assert queue.tables.commands[KEY]["upstream_id"] == EARLIER


async def test_a_claim_held_by_another_sender_is_refused_at_once_without_waiting() -> None:
    sender, queue, twin, clock = _door(SENDING)
    row = queue.tables.commands[KEY]
    row["send_token"], row["send_claimed_at"] = "another", _at(clock.t)  # held right now
    with pytest.raises(UpstreamUnavailable, match="another sender"):
        await sender.deliver(KEY, SID, DIR, _body(), {}, wait_held=False)
    assert twin.count("legacy_prompt") == 0 and row["send_token"] == "another"
    row["send_claimed_at"] = _at(clock.t - CLAIM_WINDOW_S - 1)  # aged out: its holder died
    assert (await sender.deliver(KEY, SID, DIR, _body(), {}, wait_held=False))[0] == 200
    assert twin.count("legacy_prompt") == 1


async def test_a_final_row_answers_what_it_stored() -> None:
    sender, queue, twin, _ = _door(DONE)
    queue.tables.commands[KEY].update(http_status=200, result={"state": "sent", "message_id": MID})
    assert await sender.deliver(KEY, SID, DIR, _body(), {}) == (200, {"state": "sent", "message_id": MID})
    assert twin.count("legacy_prompt") == 0


async def test_a_prompt_taken_but_never_stored_stays_sending_for_a_later_look() -> None:
    class Forgetful(UpstreamCommandsTwin):
        async def legacy_prompt(self, sid: str, directory: str, body: dict[str, object]) -> int:
            self.calls.append(("legacy_prompt", (sid, body["messageID"])))
            return 204  # taken, then the serve died: nothing stored

    sender, queue, _, _ = _door()
    sender.upstream = Forgetful()  # type: ignore[assignment]
    with pytest.raises(UpstreamUnavailable, match="does not show"):
        await sender.deliver(KEY, SID, DIR, _body(), {})
    assert queue.tables.commands[KEY]["state"] == SENDING


async def test_the_serve_away_before_a_send_lets_the_claim_go() -> None:
    sender, queue, twin, _ = _door()
    twin.fail_prompt = UpstreamUnavailable("connection refused")
    with pytest.raises(UpstreamUnavailable):
        await sender.deliver(KEY, SID, DIR, _body(), {})
    row = queue.tables.commands[KEY]
    assert (row["state"], row["send_token"]) == (SENDING, None)  # the next sender need not wait the claim out


def test_the_body_carries_the_sessions_model_and_agent_and_the_result_the_choice() -> None:
    info = {"model": {"providerID": "mock", "id": "mock-1"}, "agent": "build"}
    body = legacy_body({"text": "hi"}, MID, info, DIR)
    assert body == {"messageID": MID, "parts": [{"type": "text", "text": "hi"}],
                    "model": {"providerID": "mock", "modelID": "mock-1"}, "agent": "build"}
    assert "model" not in legacy_body({"text": "hi"}, MID, {"model": {"id": 3}, "agent": ""}, DIR)
    assert prompt_result("c1", MID, "queue", "queued", {"runtime": "legacy"}) == {
        "command_id": "c1", "message_id": MID, "admitted_seq": None, "delivery": "queue", "state": "queued",
        "runtime": "legacy"}
