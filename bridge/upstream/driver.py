"""The upstream driver port: what the daemon asks of an `opencode serve`, whatever its OpenCode generation
(docs/upstream.md "OpenCode 2.x", "The driver seam").

One `UpstreamDriver` per serve. Drivers: `Gen1Driver` (bridge.upstream.gen1_driver: 1.x, today's client
and command calls behind the port), `Gen2Driver` (bridge.upstream.gen2.driver: 2.x, from its source) and
`MemoryDriver` (bridge.upstream.driver_twin: the in-memory twin the unit tests drive). The contract every
one of them keeps is tests/unit/test_driver_contract.py.

What the port promises, in the bridge's words:

- sessions: `list_sessions()` (every session of the serve, with its directory), `running_sessions()` (the
  ones running a turn now: the turn state a status machine polls);
- the durable log: `follow(session_id, after)` yields what the session's log holds after the exclusive
  cursor `after` (-1 = from the start), in seq order, then what is appended, and never ends by itself;
  `LogRead.bad` carries frames that could not be parsed (kept, never dropped silently). Every envelope keeps
  the generation's own shape (`Envelope.raw`, stored as received): kinds come from bridge.events;
- `changes()`: which sessions moved — `hint` (a session's log reached at least `seq`) and `sweep` (hints
  may have been lost: look at every session; sent first on every (re)connect) — never a delivery guarantee;
  correctness comes from `follow` and the stored cursor;
- `live()`: what is never in a log: deltas, pending-request and status events, as envelopes;
- commands: `prompt`, `interrupt`, `switch_model`, `switch_agent`, `reply_permission`, `reply_question`
  (a 2.x form is answered here as a question is on 1.x).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bridge.events.envelope import Envelope

FROM_START = -1  # the cursor of a session nothing was stored of yet (a cursor is exclusive)

ChangeKind = Literal["hint", "sweep"]
Delivery = Literal["steer", "queue"]


@dataclass(frozen=True)
class ListedSession:
    id: str
    directory: str | None = None
    parent_id: str | None = None


@dataclass(frozen=True)
class Rejected:
    """A frame of a log that could not be parsed: why, and the frame as received (kept, never dropped)."""

    reason: str
    detail: str
    raw: str


@dataclass(frozen=True)
class LogRead:
    """One read of a durable log: the envelopes it completed, in order, and what could not be parsed."""

    envelopes: list[Envelope] = field(default_factory=list)
    bad: list[Rejected] = field(default_factory=list)


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    session_id: str | None = None  # hint only
    seq: int | None = None  # hint only: the log reached at least this seq


SWEEP = Change("sweep")


@dataclass(frozen=True)
class Admission:
    """A prompt the serve took: `seq` of the event that admitted it when the serve says (1.x
    `admittedSeq`), `inbox_id` of the 2.x inbox entry, and the answer's `data` as received."""

    message_id: str
    seq: int | None = None
    inbox_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


class UpstreamDriver(Protocol):
    generation: int

    async def list_sessions(self) -> list[ListedSession]: ...

    async def running_sessions(self) -> set[str]: ...

    def follow(self, session_id: str, after: int) -> AbstractAsyncContextManager[AsyncIterator[LogRead]]: ...

    def changes(self) -> AbstractAsyncContextManager[AsyncIterator[Change]]: ...

    def live(self) -> AbstractAsyncContextManager[AsyncIterator[Envelope]]: ...

    async def prompt(self, session_id: str, directory: str, message_id: str, text: str,
                     delivery: Delivery) -> Admission: ...

    async def interrupt(self, session_id: str, directory: str) -> bool | None:
        """True/False: whether a running turn was interrupted (2.x says); None: the serve does not say (1.x)."""

    async def switch_model(self, session_id: str, directory: str, provider_id: str, model_id: str) -> None: ...

    async def switch_agent(self, session_id: str, directory: str, agent: str) -> None: ...

    async def reply_permission(self, session_id: str, directory: str, request_id: str, reply: str) -> None: ...

    async def reply_question(self, session_id: str, directory: str, request_id: str,
                             answers: list[list[str]] | None) -> None:
        """Answer (`answers`, one list per question) or reject (`answers` None) a question (2.x: a form)."""
