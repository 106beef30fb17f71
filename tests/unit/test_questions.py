"""bridge.command_service.questions: a question answered (or rejected) on the runtime where it is pending
upstream, the answers checked against the question first, who answered kept with the request."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bridge.command_service.questions import QuestionCommands
from bridge.commands.model import CommandError
from bridge.errors import SessionNotFound
from bridge.events.question import QuestionUpdate
from bridge.store.memory import MemoryPendingStore
from tests.support.commands_twin import DIR, OTHER, SID

AT = datetime(2026, 1, 1, tzinfo=UTC)
QUESTION = {"question": "Which?", "header": "Pick", "options": [{"label": "A", "description": ""},
                                                                {"label": "B", "description": ""}]}


class _Requests:
    """The list and answer routes of bridge.upstream.requests.UpstreamRequests."""

    def __init__(self) -> None:
        self.v2: list[dict[str, Any]] = []
        self.legacy: list[dict[str, Any]] = []
        self.sent: list[tuple[str, str, str, Any]] = []
        self.settled_meanwhile = False

    async def v2_questions(self, sid: str) -> list[dict[str, Any]]:
        return self.v2

    async def legacy_questions(self, directory: str) -> list[dict[str, Any]]:
        return self.legacy

    async def answer_question(self, runtime: str, sid: str, directory: str, rid: str,
                              answers: list[list[str]] | None) -> int:
        if self.settled_meanwhile:
            raise SessionNotFound("POST: HTTP 404", 404)
        self.sent.append((runtime, sid, rid, answers))
        return 200


async def _asked(store: MemoryPendingStore, rid: str, runtime: str) -> None:
    await store.question(QuestionUpdate(SID, rid, "asked", runtime, {"id": rid}, [QUESTION]), AT)


def _answered(store: MemoryPendingStore, rid: str) -> tuple[Any, Any]:
    row = store.tables.requests[rid]
    return row["answered_by"], row["answer"]


def _door() -> tuple[QuestionCommands, MemoryPendingStore, _Requests]:
    store, upstream = MemoryPendingStore(), _Requests()
    return QuestionCommands(store, upstream), store, upstream  # type: ignore[arg-type]


async def test_answered_on_the_runtime_where_it_is_pending_and_who_answered_is_kept() -> None:
    door, store, upstream = _door()
    upstream.legacy = [{"id": "que_1", "sessionID": SID, "questions": [QUESTION]}]
    await _asked(store, "que_1", "legacy")
    done = await door.run("question_reply", "c1", SID, DIR, {"request_id": "que_1", "answers": [["B"]]}, "alice")
    assert (done.status, done.body["runtime"], done.body["state"], done.body["answers"]) == \
        (200, "legacy", "answered", [["B"]])
    assert upstream.sent == [("legacy", SID, "que_1", [["B"]])] and _answered(store, "que_1") == ("alice", [["B"]])
    upstream.v2 = [{"id": "que_2", "questions": [QUESTION]}]
    done = await door.run("question_reject", "c2", SID, DIR, {"request_id": "que_2"}, "bob")
    assert (done.body["runtime"], done.body["state"]) == ("v2", "rejected") and "answers" not in done.body


async def test_answers_that_do_not_fit_the_question_are_refused_before_anything_is_sent() -> None:
    door, store, upstream = _door()
    upstream.v2 = [{"id": "que_1", "questions": [QUESTION]}]
    await _asked(store, "que_1", "v2")
    for bad in ([["C"]], [["A", "B"]], [], "A"):
        with pytest.raises(CommandError) as e:
            await door.run("question_reply", "c1", SID, DIR, {"request_id": "que_1", "answers": bad}, "alice")
        assert e.value.code == "bad_request"
    assert upstream.sent == [] and _answered(store, "que_1") == (None, None)


async def test_a_question_pending_nowhere_is_answered_from_the_table_or_not_found() -> None:
    door, store, upstream = _door()
    upstream.legacy = [{"id": "que_1", "sessionID": OTHER, "questions": [QUESTION]}]  # another session's
    with pytest.raises(CommandError) as e:
        await door.run("question_reject", "c1", SID, DIR, {"request_id": "que_1"}, "alice")
    assert e.value.code == "not_found"
    await _asked(store, "que_9", "v2")
    await store.question(QuestionUpdate(SID, "que_9", "answered", "v2", {"id": "que_9"}, answers=[["A"]]), AT)
    await store.answered_by("que_9", "bob")
    done = await door.run("question_reply", "c2", SID, DIR, {"request_id": "que_9", "answers": [["A"]]}, "alice")
    assert done.body == {"command_id": "c2", "session_id": SID, "request_id": "que_9", "state": "answered",
                         "applied": False}
    assert upstream.sent == []


async def test_settled_by_someone_else_meanwhile_is_not_found() -> None:
    door, _, upstream = _door()
    upstream.v2, upstream.settled_meanwhile = [{"id": "que_1", "questions": [QUESTION]}], True
    with pytest.raises(CommandError) as e:
        await door.run("question_reject", "c1", SID, DIR, {"request_id": "que_1"}, "alice")
    assert e.value.code == "not_found"
