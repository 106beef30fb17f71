"""The reads of the mirror: the WebSocket feed's (`FanoutStore`: events after a seq, frames, a session's
head, the session list, permission requests), the replay frames PostgreSQL builds, and the audit's
(`AuditReader`: sessions, events, transcripts, tool calls, the hash chain's rows).

    queries.py  the read statements (SQLAlchemy Core; the tool-call query as text)
    replay.py   stored events as WebSocket frames, built by PostgreSQL from the normalized columns
    feed.py     FanoutStore: the feed's reads on the read pool (and the standby), permission rows recorded
    audit.py    AuditReader
"""

from bridge.store.reads.audit import AuditReader
from bridge.store.reads.feed import FanoutStore
from bridge.store.reads.queries import SessionFilter, ToolCallFilter
from bridge.store.reads.replay import StoredFrame

__all__ = ["AuditReader", "FanoutStore", "SessionFilter", "StoredFrame", "ToolCallFilter"]
