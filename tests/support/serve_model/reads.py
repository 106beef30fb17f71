"""The serve's plain reads, answered from the model the same way by both adapters (docs/upstream.md §6):
health, the session listing, `/api/session/active`, one session, its pending requests and questions, the
legacy `/question` and `/permission`, todos and diffs. A session route answers 404 for a session unknown
or deleted first, then the fault plan's error for the route, if any."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.serve_model.frames import Answer, session_not_found
from tests.support.serve_model.model import FakeSession, ServeModel

# route -> (fault plan name or None, the answer's body from the model and the session)
_READS: dict[str, tuple[str | None, Callable[[ServeModel, FakeSession | None], Any]]] = {
    "health": (None, lambda m, s: {"healthy": True, "version": "1.18.33"}),
    "list": ("list", lambda m, s: {"data": [{"id": x.id, "location": {"directory": x.directory}}
                                            for x in m.sessions.values() if not x.deleted],
                                   "cursor": {"previous": None, "next": None}}),
    "active": (None, lambda m, s: {"data": m.active}),
    "legacy_question": ("question", lambda m, s: m.legacy_questions),
    "legacy_permission": (None, lambda m, s: []),
    "session": (None, lambda m, s: {"data": {"id": s.id, "location": {"directory": s.directory}}} if s else None),
    "permission": ("permission", lambda m, s: {"data": m.permissions.get(s.id, []) if s else []}),
    "question": ("question", lambda m, s: {"data": m.questions.get(s.id, []) if s else []}),
    "todo": (None, lambda m, s: m.todos.get(s.id, []) if s else []),
    "diff": (None, lambda m, s: []),
}
SESSION_READS = frozenset({"session", "permission", "question", "todo", "diff"})


def plain_read(model: ServeModel, route: str, sid: str | None = None) -> Answer:
    """The answer to one plain read (`sid` for the session routes)."""
    fault, body = _READS[route]
    s = None
    if route in SESSION_READS:
        assert sid is not None
        if (s := model.session(sid)) is None:
            return session_not_found(sid)
    if fault is not None and (failed := model.faults.failure(fault)) is not None:
        return failed
    return 200, body(model, s)
