"""The write transaction (docs/mirror.md "Writing exactly once"): the COPY path and the INSERT path of one
transaction, the group committer around it, and `EventStore`, the store of one upstream that callers write
through.

    event_store.py  EventStore: write_batch (through the committer while `group_commit()` runs), rejects,
                    claim/release and deletion (the statements are bridge.store.chat_sessions')
    committer.py    GroupCommitter: pending writes of many sessions into one transaction
    transaction.py  the one transaction: fence, COPY or INSERT, duplicates, hash chain, cursor + NOTIFY
    copy_in.py      its COPY path (fast path) and the chain links computed in Python
    chain.py        the hash chain linked by PostgreSQL when Python could not
    duplicates.py   rows of a batch that did not go in; rejects.py: the reject rows and the clashing rows read back
    rows.py         ChatEvent -> chat_session_events row (pure)
"""

from bridge.errors import LeaseLost
from bridge.store.writes.event_store import EventStore
from bridge.store.writes.transaction import BatchResult, WriteHook

__all__ = ["BatchResult", "EventStore", "LeaseLost", "WriteHook"]
