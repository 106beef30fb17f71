"""bridge.command_service.service.CommandService: every command exactly once on the door's twins (the rows:
tests/support/door_twins.py; the serve: tests/support/commands_twin.py) — authorize, rate-limit, the row
`pending`, the upstream call, the result stored; a retry answers from the row or sends the same id again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.questions import QuestionCommands
from bridge.commands.model import CommandError, parse_command, v2_prompt_message_id
from bridge.commands.ratelimit import RateLimiter
from bridge.errors import InvalidRequest, UpstreamUnavailable
from bridge.store.commands_pending import CommandKey
from tests.support.commands_twin import DIR, OTHER, SID, UpstreamCommandsTwin
from tests.support.door_twins import UPSTREAM, claims, door_twins
from tests.support.serve_model import Clock

AT = datetime(2026, 1, 1, tzinfo=UTC)


class _Serve(UpstreamCommandsTwin):
    async def session_op(self, sid: str, directory: str, method: str, tail: str, body: Any) -> tuple[int, Any]:
        self.calls.append(("session_op", (sid, method, tail)))
        return 200, {"id": sid, "title": (body or {}).get("title")}

    async def slash_commands(self, directory: str | None) -> list[dict[str, Any]]:
        return [{"name": "review"}]

    async def legacy_abort(self, sid: str, directory: str) -> int:
        self.calls.append(("legacy_abort", (sid,)))
        return 200


class Door:
    def __init__(self, runtime: str = "v2", burst: int = 100) -> None:
        self.clock, self.serve = Clock(1000.0), _Serve()
        self.store, self.queue, self.pending = door_twins(self.clock)
        self.tables = self.store.tables
        self.service = CommandService(
            self.store, self.serve,  # type: ignore[arg-type]
            DoorSettings(directories=("/srv/agent",), prompt_runtime=runtime, exit_after_upstream="",
                         clock=self.clock, now_ms=lambda: 1_765_000_000_000),
            limiter=RateLimiter(rate_per_s=1.0, burst=burst, clock=self.clock),
            questions=QuestionCommands(self.pending, self.serve),  # type: ignore[arg-type]
            queue=self.queue)  # type: ignore[arg-type]

    async def run(self, name: str, body: dict[str, Any], sid: str | None = SID, rid: str | None = None,
                  **token: Any) -> tuple[int, dict[str, Any]]:
        out = await self.service.execute(claims(**token), parse_command(name, body, sid, rid))
        return out.status, out.body


def _prompt(cid: str = "c1", text: str = "hi") -> dict[str, Any]:
    return {"command_id": cid, "text": text, "delivery": "steer"}


async def _refused(door: Door, name: str, body: dict[str, Any], sid: str | None = SID, **token: Any) -> str:
    with pytest.raises(CommandError) as e:
        await door.run(name, body, sid, **token)
    return e.value.code


async def test_a_v2_prompt_is_sent_once_and_a_retry_answers_from_its_row() -> None:
    door = Door()
    status, body = await door.run("prompt", _prompt())
    mid = v2_prompt_message_id(UPSTREAM, SID, "c1", "alice")
    assert (status, body["message_id"], body["admitted_seq"], body["runtime"]) == (200, mid, 1, "v2")
    assert door.tables.commands[CommandKey("alice", SID, "c1")]["state"] == "done"
    assert await door.run("prompt", _prompt()) == (status, body)
    assert door.serve.count("prompt") == 1
    assert await _refused(door, "prompt", _prompt(text="other")) == "conflict"  # same id, another command


async def test_an_upstream_outage_keeps_the_row_pending_and_the_retry_sends_the_same_id() -> None:
    door = Door()
    door.serve.fail_prompt = UpstreamUnavailable("connection refused")
    assert await _refused(door, "prompt", _prompt()) == "upstream_unavailable"
    assert door.tables.commands[CommandKey("alice", SID, "c1")]["state"] == "pending"
    door.serve.fail_prompt = None
    assert (await door.run("prompt", _prompt()))[0] == 200
    sent = [args[2] for name, args in door.serve.calls if name == "prompt"]
    assert len(sent) == 2 and sent[0] == sent[1]


async def test_a_refusal_of_the_serve_is_stored_failed_without_its_details() -> None:
    door = Door()
    door.serve.fail_prompt = InvalidRequest("POST http://127.0.0.1:4096/secret: HTTP 400")
    with pytest.raises(CommandError) as e:
        await door.run("prompt", _prompt())
    assert e.value.code == "bad_request" and "127.0.0.1" not in e.value.message
    row = door.tables.commands[CommandKey("alice", SID, "c1")]
    assert (row["state"], row["http_status"]) == ("failed", 400)


async def test_refused_before_any_row_scope_rate_erasure_deletion_and_unknown_sessions() -> None:
    door = Door(burst=3)
    assert await _refused(door, "interrupt", {"command_id": "i1"}, scope="prompt") == "forbidden"
    door.store.tombstones.add(SID)
    assert await _refused(door, "prompt", _prompt("c2")) == "not_found"
    door.tables.put(OTHER, directory=DIR, deleted=True)
    assert await _refused(door, "prompt", _prompt("c3"), OTHER) == "not_found"
    assert await _refused(door, "prompt", _prompt("c4"), "ses_0000000000000000000000000X") == "not_found"
    assert await _refused(door, "prompt", _prompt("c5"), OTHER) == "rate_limited"
    assert CommandKey("alice", SID, "c2") not in door.tables.commands and door.serve.count("prompt") == 0


async def test_a_legacy_prompt_goes_with_a_time_stamped_id_through_the_router() -> None:
    door = Door("legacy")
    status, body = await door.run("prompt", _prompt())
    pure = v2_prompt_message_id(UPSTREAM, SID, "c1", "alice")
    assert (status, body["state"], body["runtime"]) == (200, "sent", "legacy")
    assert body["message_id"] != pure and body["message_id"][-14:] == pure[-14:]
    assert door.serve.count("legacy_prompt") == 1 and door.serve.count("prompt") == 0


async def test_session_creation_control_commands_and_session_ops() -> None:
    door = Door()
    status, body = await door.run("create_session", {"command_id": "s1", "directory": "/srv/agent/app"}, None)
    assert status == 201 and body["directory"] == "/srv/agent/app" and body["session_id"].startswith("ses_")
    assert (await door.run("model", {"command_id": "m1", "provider_id": "mock", "model_id": "mock-2"}))[1][
        "model_id"] == "mock-2"
    assert (await door.run("agent", {"command_id": "a1", "agent": "plan"}))[1]["agent"] == "plan"
    _, body = await door.run("interrupt", {"command_id": "i1", "drop_queued": True})
    assert body == {"command_id": "i1", "session_id": SID, "legacy_aborted": False, "dropped": []}
    assert (await door.run("title", {"command_id": "t1", "title": "New"}))[1]["title"] == "New"
    assert await _refused(door, "slash_command", {"command_id": "x1", "command": "nope"}) == "not_found"


async def test_a_permission_reply_is_sent_where_pending_and_who_answered_is_kept() -> None:
    door = Door()
    door.serve.legacy_pending = [{"id": "per_1", "sessionID": SID}]
    await door.pending.permission_asked(SID, "per_1", {"id": "per_1"}, AT, None, None, None, "legacy")
    _, body = await door.run("permission_reply", {"command_id": "p1", "reply": "once"}, SID, "per_1")
    assert (body["runtime"], body["applied"]) == ("legacy", True)
    assert door.tables.requests["per_1"]["answered_by"] == "alice"
    await door.pending.permission_asked(SID, "per_2", {"id": "per_2"}, AT, None, None, None)
    await door.pending.permission_replied(SID, "per_2", {"id": "per_2"}, AT, "reject")  # answered elsewhere
    _, body = await door.run("permission_reply", {"command_id": "p2", "reply": "once"}, SID, "per_2")
    assert (body["reply"], body["applied"]) == ("reject", False)
    assert await _refused(door, "permission_reply", {"command_id": "p3", "reply": "once"}, SID) == "bad_request"


async def test_a_parents_token_is_widened_to_its_subagents_session() -> None:
    door = Door()

    async def widen(token: Any, sid: str) -> Any:
        return claims(sessions=frozenset({SID, sid}))

    door.service.widen = widen
    assert (await door.run("prompt", _prompt(), OTHER, sessions=frozenset({SID})))[0] == 200
