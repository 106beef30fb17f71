"""The `chat_sessions` table (and the incarnations and gaps that go with it): leases, status, titles,
parking, the deletion tombstone, the session tree, and the one row reader (docs/lifecycle.md).

    claims.py   the claim, of one session or a batch in one transaction (claim_plan.py: its pure part)
    adoption.py what the adoption sweep reads: orphans, and the sessions only of live holders found dead
    leases.py   renew, hand-off, release, adoption; incarnations; `LeaseStore` (executes claims, leases and
                status: the PostgreSQL side of bridge.store.ports' LeasePort and SessionStatusPort)
    status.py   status writes by the lease holder, parking, deletion, title, gaps (statements)
    tree.py     parent and children from the stored seq 0 (docs/upstream.md §20), a token widened to them
    reader.py   `read_session`: the one reader of a row; the listings

Its in-memory twins are bridge.store.memory.leases and .status (docs/ports.md).
"""

from typing import TYPE_CHECKING

from bridge.store.chat_sessions.claim_plan import ClaimAsk
from bridge.store.chat_sessions.claims import Claim, ClaimOutcome
from bridge.store.chat_sessions.leases import LeaseStore, TurnState
from bridge.store.chat_sessions.reader import read_session

__all__ = ["Claim", "ClaimAsk", "ClaimOutcome", "LeaseStore", "TurnState", "read_session"]

if TYPE_CHECKING:  # mypy holds the PostgreSQL class to its ports (bridge.store.ports)
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bridge.store.ports import LeasePort, SessionStatusPort

    def _conforms(engine: AsyncEngine) -> tuple[LeasePort, SessionStatusPort]:
        return LeaseStore(engine, ""), LeaseStore(engine, "")
