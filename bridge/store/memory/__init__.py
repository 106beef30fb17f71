"""In-memory twins of the store's ports (docs/ports.md), one module per port, for unit tests of the parts
that use a store: pure Python, no I/O (an import-linter contract keeps SQLAlchemy and the drivers out).
Twins built on one `MemoryTables` share its rows, as the PostgreSQL classes share one database.

    tables.py        MemoryTables: sessions (and their events and gaps), command rows, pending requests; the
                     clock, the journal of what a process could observe
    leases.py        MemoryLeases: LeasePort
    status.py        MemoryStatus: SessionStatusPort
    commands.py      MemoryCommandStore: CommandRowsPort
    prompt_queue.py  MemoryPromptQueue: PromptQueuePort
    pending.py       MemoryPendingStore: PendingRequestsPort (and the fan-out's permission records)
    lease_store.py   MemoryLeaseStore: leases and status together, as the session parts use them

tests/integration/test_port_*.py run each port's contract on its twin and on PostgreSQL.
"""

from typing import TYPE_CHECKING

from bridge.store.memory.commands import MemoryCommandStore
from bridge.store.memory.lease_store import MemoryLeaseStore
from bridge.store.memory.leases import MemoryLeases
from bridge.store.memory.pending import MemoryPendingStore
from bridge.store.memory.prompt_queue import MemoryPromptQueue
from bridge.store.memory.status import MemoryStatus
from bridge.store.memory.tables import MemoryEvent, MemorySession, MemoryTables

__all__ = ["MemoryCommandStore", "MemoryEvent", "MemoryLeaseStore", "MemoryLeases", "MemoryPendingStore",
           "MemoryPromptQueue", "MemorySession", "MemoryStatus", "MemoryTables"]

if TYPE_CHECKING:  # mypy holds every twin to its port
    from bridge.store.ports import (
        CommandRowsPort,
        LeasePort,
        PendingRequestsPort,
        PromptQueuePort,
        SessionStatusPort,
    )

    _leases: LeasePort = MemoryLeases()
    _status: SessionStatusPort = MemoryStatus()
    _commands: CommandRowsPort = MemoryCommandStore()
    _queue: PromptQueuePort = MemoryPromptQueue()
    _pending: PendingRequestsPort = MemoryPendingStore()
    _both: tuple[LeasePort, SessionStatusPort] = (MemoryLeaseStore(), MemoryLeaseStore())
