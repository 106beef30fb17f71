"""PostgreSQL: tables (SQLAlchemy Core), the one write transaction, the group committer, the reads.
One module per job:

    schema.py        every table on one metadata (the migrations must produce exactly these; a test compares them)
    write.py         the one write transaction: the batches of one or many sessions (fence, insert with
                     the hash chain, duplicates, cursor + NOTIFY), as prepared SQL over unnest arrays
    committer.py     GroupCommitter: pending writes of many sessions into one transaction (`write_batch`
                     goes through it while `EventStore.group_commit()` runs)
    duplicates.py    rows of a batch that did not go in; queries.py: the write path's other SQL (rejects)
    rows.py          ChatEvent -> chat_session_events row (pure)
    payload.py       JSON/text PostgreSQL cannot hold (NUL, lone surrogates, NaN) -> lossy + exact text (pure)
    jsonb_text.py    PostgreSQL's text form of a jsonb value, in Python (what the hash chain links; pure)
    leases.py        SQL of the leases (claim, renew, hand-off, release, adoption) and incarnations; LeaseStore
    status.py        SQL of a session's status: status writes, parking, deletion tombstone, title, gaps
    reads.py         the read queries: listings, the feed (events, head, permissions), the audit
    replay.py        stored events as WebSocket frames, built by PostgreSQL from the normalized columns
    codecs.py        rows <-> Python (pure): SessionRow, the one view of a chat_sessions row, and session_row()
    events_store.py  EventStore: write_batch/commit, claim/release, rejects, session rows
    fanout.py        FanoutStore: commit/status notifications, permission requests, the feed's reads
    audit.py         the hash chain at write time; AuditReader (the audit's reads)
    commands.py      CommandStore: chat_commands rows
    db.py            engine from a postgresql:// URL, alembic upgrade/current/head
    embedded.py      embedded PostgreSQL for `make run` without BRIDGE_DATABASE_URL

Contract used by the rest of the daemon:

    from bridge.store.db import make_engine, upgrade_to_head, schema_is_at_head
    from bridge.store.embedded import start_embedded        # -> EmbeddedPostgres(url, stop())
    from bridge.store.events_store import EventStore, LeaseLost, BatchResult
    from bridge.store.codecs import SessionRow
    async with store.group_commit(): ...                   # the committer, around the followers
    store.write_batch(session_id, epoch, events, received_at)  # through the committer while it runs
"""
