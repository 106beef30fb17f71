"""PostgreSQL, cut by table: one sub-package per family of tables, each with a public face (its
`__init__`) that the rest of the daemon imports, and modules inside it that only the store imports.

    schema.py          every table on one metadata (the migrations must produce exactly these; a test
                       compares them) · db.py (engines, alembic) · embedded.py (PostgreSQL for `make run`)
    chat_sessions/     the `chat_sessions` row (and incarnations, gaps): leases, status, titles, parking,
                       deletion, the session tree, `read_session` (the one row reader); LeaseStore
    writes/            the one write transaction (COPY path and INSERT path together), the group committer,
                       the hash chain at write time, rejects; EventStore
    reads/             the feed (FanoutStore), the replay frames PostgreSQL builds, the audit (AuditReader)
    commands_pending/  `chat_commands` and `chat_permission_requests`: CommandStore, PromptQueueStore,
                       PendingStore
    ports/             one typing.Protocol per store family (leases, status, command rows, prompt queue,
                       pending requests) and the records they answer with (pure) — docs/ports.md
    memory/            the in-memory twin of each port, on shared MemoryTables (pure; for unit tests)
    notices.py         the NOTIFY channels (commits, status, commands): payloads and statements
    revoked.py         `bridge_revoked_tokens`
    session_errors.py  `chat_session_errors`: the upstream's `session.error` events (live only upstream)
    codecs.py          rows <-> Python (pure): SessionRow, the one view of a chat_sessions row
    payload.py, jsonb_text.py, hash_chain.py   text PostgreSQL can hold, PostgreSQL's text of a jsonb value,
                       the tamper-evident chain (pure)

Families import downwards only: chat_sessions ← commands_pending ← reads, and chat_sessions ← writes; all of
them use ports, notices, codecs, schema (the acyclic contract in pyproject.toml keeps it so). ports and
memory import no SQL (the pure-ports contract).

SQL in one style: SQLAlchemy Core constructs, named and built by one function each, executed on the
SQLAlchemy connection. Core is the store's style because the statements are composed (filters, keysets,
upserts, one WHERE for a session's primary key) and because the migration test compares the schema those
statements are written against. Raw driver SQL stays only where it was measured faster on the hot path:
the write transaction (writes/transaction.py, writes/copy_in.py: prepared statements over unnest arrays and
COPY, no compilation per call; bench/write_path.py), and text where Core cannot say it as plainly: the
recursive hash-chain update (writes/chain.py), the replay frames PostgreSQL builds (reads/replay.py), the
audit's tool-call query (reads/queries.py) and the NOTIFY calls (notices.py).

Contract used by the rest of the daemon:

    from bridge.store.db import make_engine, upgrade_to_head, schema_is_at_head
    from bridge.store.embedded import start_embedded        # -> EmbeddedPostgres(url, stop())
    from bridge.store.writes import EventStore, LeaseLost, BatchResult
    from bridge.store.chat_sessions import LeaseStore, read_session
    from bridge.store.reads import FanoutStore, AuditReader
    from bridge.store.commands_pending import CommandStore, PromptQueueStore, PendingStore
    from bridge.store.codecs import SessionRow
    from bridge.store.ports import LeasePort, SessionStatusPort, CommandRowsPort, PromptQueuePort, PendingRequestsPort
    from bridge.store.memory import MemoryTables, MemoryLeaseStore, ...   # the twins, for unit tests
    async with store.group_commit(): ...                   # the committer, around the followers
    store.write_batch(session_id, epoch, events, received_at)  # through the committer while it runs
"""
