"""The store's ports (docs/ports.md): one `typing.Protocol` per store family, the records it answers with,
and nothing else (pure; no SQL, no I/O). The PostgreSQL classes of bridge.store conform to them, the
in-memory twins of bridge.store.memory too, and one contract suite per port runs the same tests on both
(tests/integration/test_port_*.py). A consumer that needs a store names its port, not the class.

    leases.py        LeasePort: claims, epochs (fencing), release, cursor, deletion, renewal, adoption
    status.py        SessionStatusPort: statuses (the lease holder's), parking, titles, gaps, turn state
    commands.py      CommandRowsPort: every command's row exactly once
    prompt_queue.py  PromptQueuePort: prompt rows, the legacy queue, the send claim
    pending.py       PendingRequestsPort: questions, permissions, who answered
"""

from bridge.store.ports.commands import CommandKey, CommandRow, CommandRowsPort
from bridge.store.ports.leases import Claim, ClaimAsk, ClaimOutcome, LeasePort
from bridge.store.ports.pending import PendingRequestsPort, StoredRequest
from bridge.store.ports.prompt_queue import PromptQueuePort, PromptRow
from bridge.store.ports.status import SessionStatusPort, StatusWrite, TurnState

__all__ = ["Claim", "ClaimAsk", "ClaimOutcome", "CommandKey", "CommandRow", "CommandRowsPort", "LeasePort",
           "PendingRequestsPort", "PromptQueuePort", "PromptRow", "SessionStatusPort", "StatusWrite",
           "StoredRequest", "TurnState"]
