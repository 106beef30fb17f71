"""The pending requests' port contract (bridge.store.ports.pending, docs/ports.md, docs/mirror.md "Pending
requests"), run on PostgreSQL and on the in-memory twin alike: questions asked and settled, the first record
of each column kept, the first answer kept, the lists in order, the sessions' directories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bridge.events.question import QuestionUpdate
from tests.support.store_ports import Backend

SID = "ses_pend"
OWNER = "host-a:1:aaaa"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def asked(request_id: str, session_id: str = SID, runtime: str = "v2") -> QuestionUpdate:
    return QuestionUpdate(session_id, request_id, "asked", runtime, {"type": "question.v2.asked", "id": request_id},
                          questions=[{"question": "Which?"}], call_id="call_1", assistant_message_id="msg_a")


def answered(request_id: str, answers: list[list[str]]) -> QuestionUpdate:
    return QuestionUpdate(SID, request_id, "answered", "v2", {"type": "question.v2.replied", "id": request_id},
                          answers=answers)


async def test_a_question_asked_then_settled_keeps_the_first_record_of_each(backend: Backend) -> None:
    pending = backend.pending()
    await pending.question(asked("que_1"), T0)
    await pending.question(asked("que_1"), T0 + timedelta(seconds=5))  # a reconnect records it again
    got = await pending.get("que_1")
    assert got is not None
    assert (got.kind, got.session_id, got.runtime, got.asked_at, got.reply) == ("question", SID, "v2", T0, None)
    assert got.asked == {"type": "question.v2.asked", "id": "que_1"}
    await pending.question(answered("que_1", [["A"]]), T0 + timedelta(seconds=9))
    await pending.question(answered("que_1", [["B"]]), T0 + timedelta(seconds=20))
    got = await pending.get("que_1")
    assert got is not None
    assert (got.reply, got.answer, got.replied_at, got.asked_at) == ("answered", [["A"]], T0 + timedelta(seconds=9),
                                                                     T0)
    assert await pending.get("que_unknown") is None


async def test_a_question_settled_before_it_was_seen_asked(backend: Backend) -> None:
    pending = backend.pending()
    await pending.question(answered("que_1", [["A"]]), T0)
    await pending.question(asked("que_1"), T0 + timedelta(seconds=1))
    got = await pending.get("que_1")
    assert got is not None and (got.reply, got.asked_at) == ("answered", T0 + timedelta(seconds=1))


async def test_only_the_first_answer_through_the_bridge_is_kept(backend: Backend) -> None:
    pending = backend.pending()
    await pending.question(asked("que_1"), T0)
    await pending.answered_by("que_1", "alice", [["A"]])
    await pending.answered_by("que_1", "bob", [["B"]])
    got = await pending.get("que_1")
    assert got is not None and (got.answered_by, got.answer) == ("alice", [["A"]])
    await backend.permission(SID, "per_1", asked_at=T0)
    await pending.answered_by("per_1", "carol")
    got = await pending.get("per_1")
    assert got is not None and (got.answered_by, got.answer) == ("carol", None)
    await pending.answered_by("que_unknown", "alice")  # nothing to record
    assert await pending.get("que_unknown") is None


async def test_a_sessions_questions_oldest_first_its_requests_by_kind(backend: Backend) -> None:
    pending = backend.pending()
    await pending.question(asked("que_b"), T0 + timedelta(seconds=2))
    await pending.question(asked("que_a"), T0 + timedelta(seconds=2))
    await pending.question(asked("que_c"), T0)
    await pending.question(answered("que_early", [["A"]]), T0)  # never seen asked: first
    await pending.question(asked("que_other", session_id="ses_other"), T0)
    await backend.permission(SID, "per_1", asked_at=T0)
    await pending.question(asked("que_legacy", runtime="legacy"), T0 + timedelta(seconds=3))
    assert [q.request_id for q in await pending.questions(SID)] == ["que_early", "que_c", "que_a", "que_b",
                                                                     "que_legacy"]
    assert await pending.session_requests(SID, "permission") == {"per_1": None}
    assert await pending.session_requests(SID, "question", runtime="legacy") == {"que_legacy": None}
    assert (await pending.session_requests(SID, "question"))["que_early"] == "answered"


async def test_the_pending_list_is_every_unanswered_request_oldest_first(backend: Backend) -> None:
    pending = backend.pending()
    await backend.permission(SID, "per_new", asked_at=T0 + timedelta(seconds=9))
    await backend.permission(SID, "per_old", asked_at=T0, runtime="legacy")
    await backend.permission(SID, "per_done", asked_at=T0, reply="once")
    await pending.question(asked("que_1"), T0 + timedelta(seconds=5))
    await pending.question(answered("que_gone", [["A"]]), T0)
    assert [r.request_id for r in await pending.pending()] == ["per_old", "que_1", "per_new"]
    assert [r.request_id for r in await pending.pending(limit=1)] == ["per_old"]
    assert [r.request_id for r in await pending.pending(runtime="v2")] == ["que_1", "per_new"]


async def test_the_sessions_directories_and_the_requests_sessions(backend: Backend) -> None:
    pending = backend.pending()
    assert await pending.directories(set()) == {}
    await backend.leases().claim("ses_a", OWNER, "/srv/a")
    await backend.leases().claim("ses_b", OWNER, "/srv/a")
    await backend.leases().claim("ses_c", OWNER)
    assert await pending.directories({"ses_a", "ses_b", "ses_c", "ses_unknown"}) == {
        "/srv/a": {"ses_a", "ses_b"}, None: {"ses_c", "ses_unknown"}}
    await backend.permission("ses_a", "per_1")
    await pending.question(asked("que_1", session_id="ses_b"), T0)
    assert await pending.sessions_of(["per_1", "que_1", "per_unknown"]) == {"per_1": "ses_a", "que_1": "ses_b"}
    assert await pending.sessions_of([]) == {}


async def test_an_answer_through_the_bridge_fills_a_question_settled_without_one(backend: Backend) -> None:
    pending = backend.pending()
    await pending.question(asked("que_1"), T0)
    await pending.question(QuestionUpdate(SID, "que_1", "unknown", "v2", {"id": "que_1"}), T0)  # no answers known
    await pending.answered_by("que_1", "alice", [["A"]])
    got = await pending.get("que_1")
    assert got is not None and (got.reply, got.answer, got.answered_by) == ("unknown", [["A"]], "alice")
