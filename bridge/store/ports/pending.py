"""The port of pending requests and questions (docs/ports.md, docs/mirror.md "Pending requests"): what was
asked, what was answered, by whom. PostgreSQL: `PendingStore` (bridge.store.commands_pending); in memory:
bridge.store.memory.pending.

The rules both keep (tests/integration/test_port_pending.py): a second record of a request keeps the first
value of each column (asked, and settled, separately); only the first answer (`answered_by`) is kept; a
question list is oldest asked first; the pending list is the requests without a reply, oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from bridge.events.question import QuestionUpdate

MAX_LIST = 500


@dataclass(frozen=True)
class StoredRequest:
    """One row, as the fan-out, the commands and operators read it."""

    kind: str  # permission | question
    session_id: str
    request_id: str
    runtime: str
    asked: dict[str, Any] | None  # the asking envelope (a question's `questions` are in its data)
    asked_at: datetime | None
    reply: str | None  # NULL: pending
    answer: Any
    answered_by: str | None
    replied_at: datetime | None


class PendingRequestsPort(Protocol):
    @property
    def upstream(self) -> str: ...

    async def question(self, update: QuestionUpdate, at: datetime) -> None: ...

    async def answered_by(self, request_id: str, subject: str, answer: Any = None) -> None: ...

    async def get(self, request_id: str) -> StoredRequest | None: ...

    async def questions(self, session_id: str) -> list[StoredRequest]: ...

    async def session_requests(self, session_id: str, kind: str, runtime: str | None = None) -> dict[str, str | None]:
        """request id -> reply (None while pending) of the session's requests of one kind (and runtime)."""
        ...

    async def pending(self, limit: int = MAX_LIST, runtime: str | None = None) -> list[StoredRequest]: ...

    async def directories(self, session_ids: set[str]) -> dict[str | None, set[str]]:
        """The sessions grouped by their directory (None: not known here)."""
        ...

    async def sessions_of(self, request_ids: list[str]) -> dict[str, str]: ...
