"""`MemoryLeaseStore`: the twins of the lease port and the status port on one set of tables, as the session
parts use them together (`LeaseStore` and the lease share of `EventStore` in production), with the test
set-up of bridge.store.memory.tables at hand: `put` a row as an earlier process left it, `advance` a
committed batch, read `rows` and the `journal`.

For unit tests of bridge.sessions and bridge.upstream that need the store's behaviour but not PostgreSQL;
the contract suites (tests/integration/test_port_leases.py, test_port_status.py) hold both twins to the
same tests as the real stores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from bridge.store.memory.leases import MemoryLeases
from bridge.store.memory.status import MemoryStatus
from bridge.store.memory.tables import MemorySession, MemoryTables


class MemoryLeaseStore(MemoryLeases, MemoryStatus):
    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC), *,
                 tables: MemoryTables | None = None) -> None:
        super().__init__(tables or MemoryTables(clock))

    @property
    def rows(self) -> dict[str, MemorySession]:
        return self.tables.sessions

    @property
    def journal(self) -> list[tuple[Any, ...]]:
        return self.tables.journal

    def put(self, session_id: str, *, kinds: Sequence[str] | None = None, **columns: Any) -> MemorySession:
        return self.tables.put(session_id, kinds=kinds, **columns)

    def advance(self, session_id: str, epoch: int, seq: int, kinds: list[str] | None = None) -> int:
        return self.tables.advance(session_id, epoch, seq, kinds)
