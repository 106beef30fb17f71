"""Answering a question through the bridge (docs/commands.md, "Questions"): `question_reply` with the
answers, `question_reject`. Runtime-aware like permission replies: the question is answered on the routes
of the runtime where it is pending upstream (docs/upstream.md §18), found in its list route, not taken
from the client. The answers are checked against the question before anything is sent
(bridge.events.question.check_answers: `400` otherwise), and the token subject that answered is kept
with the request (the pending-requests table: who answered what, and when).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.commands.model import CommandError
from bridge.errors import SessionNotFound
from bridge.events.question import check_answers, pending_question, question_specs, stored_question
from bridge.store.ports.pending import PendingRequestsPort
from bridge.upstream.requests import UpstreamRequests


@dataclass(frozen=True)
class QuestionDone:
    status: int
    body: dict[str, Any]
    upstream_status: int | None = None


class QuestionCommands:
    def __init__(self, store: PendingRequestsPort, upstream: UpstreamRequests) -> None:
        self.store = store
        self.upstream = upstream

    async def answered_by(self, request_id: str, subject: str) -> None:
        """A permission request answered through the bridge: who answered, kept with the request."""
        await self.store.answered_by(request_id, subject)

    async def _pending_upstream(self, sid: str, directory: str, rid: str) -> tuple[str, Any] | None:
        """(runtime, questions) of the request if it is pending upstream; None if it is not."""
        for item in await self.upstream.v2_questions(sid):
            q = pending_question("v2", item, sid)
            if q is not None and q.request_id == rid:
                return "v2", q.questions
        for item in await self.upstream.legacy_questions(directory):
            q = pending_question("legacy", item)
            if q is not None and q.request_id == rid and q.session_id == sid:
                return "legacy", q.questions
        return None

    async def run(self, name: str, command_id: str, sid: str, directory: str, args: dict[str, Any],
                  subject: str) -> QuestionDone:
        rid = args["request_id"]
        body: dict[str, Any] = {"command_id": command_id, "session_id": sid, "request_id": rid}
        found = await self._pending_upstream(sid, directory, rid)
        if found is None:
            row = await self.store.get(rid)
            if row is not None and row.kind == "question" and row.session_id == sid and row.reply is not None:
                return QuestionDone(200, {**body, "state": row.reply, "applied": False})
            raise CommandError("not_found", "no such pending question in this session")
        runtime, questions = found
        row = await self.store.get(rid)
        if questions is None and row is not None and row.asked is not None:  # the list item lacks them
            asked = stored_question(sid, row.asked)
            questions = None if asked is None else asked.questions
        answers: list[list[str]] | None = None
        if name == "question_reply":
            try:
                answers = check_answers(question_specs(questions), args["answers"])
            except ValueError as e:
                raise CommandError("bad_request", str(e)) from None
        try:
            status = await self.upstream.answer_question(runtime, sid, directory, rid, answers)
        except SessionNotFound:  # settled meanwhile (by someone else)
            raise CommandError("not_found", "the question is no longer pending") from None
        await self.store.answered_by(rid, subject, answers)
        state = "answered" if answers is not None else "rejected"
        out = {**body, "runtime": runtime, "state": state, "applied": True}
        if answers is not None:
            out["answers"] = answers
        return QuestionDone(200, out, status)
