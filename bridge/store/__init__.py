"""PostgreSQL: tables (SQLAlchemy Core), the one write transaction, the group committer, the reads.

    schema.py        tables (the migrations must produce exactly these; a test compares them)
    queries.py       SQL statements as named Core constructs (sessions, leases, rejects)
    write.py         the one write transaction: the batches of one or many sessions (fence, insert with
                     the hash chain, duplicates, cursor + NOTIFY), as prepared SQL over unnest arrays
    committer.py     GroupCommitter: pending writes of many sessions into one transaction (`write_batch`
                     goes through it while `EventStore.group_commit()` runs)
    events_store.py  EventStore: leases (claim/release), write_batch/commit, rejects, session rows
    rows.py          ChatEvent -> chat_session_events row (pure)
    payload.py       JSON/text PostgreSQL cannot hold (NUL, lone surrogates, NaN) -> lossy + exact text (pure)
    jsonb_text.py    PostgreSQL's text form of a jsonb value, in Python (what the hash chain links; pure)
    replay.py        stored events as WebSocket frames, built by PostgreSQL from the normalized columns
    db.py            engine from a postgresql:// URL, alembic upgrade/current/head
    embedded.py      embedded PostgreSQL for `make run` without BRIDGE_DATABASE_URL

Contract used by the rest of the daemon:

    from bridge.store.db import make_engine, upgrade_to_head, schema_is_at_head
    from bridge.store.embedded import start_embedded        # -> EmbeddedPostgres(url, stop())
    from bridge.store.events_store import EventStore, LeaseLost, BatchResult, SessionRow
    async with store.group_commit(): ...                   # the committer, around the followers
    store.write_batch(session_id, epoch, events, received_at)  # through the committer while it runs
"""
