"""PostgreSQL: tables (SQLAlchemy Core), the one module that owns SQL, the batch writer.

    schema.py        tables (the migrations must produce exactly these; a test compares them)
    queries.py       every SQL statement, as named Core constructs; nothing else writes SQL
    events_store.py  EventStore: leases (claim/release), write_batch, rejects, session rows
    rows.py          ChatEvent -> chat_session_events row (pure)
    payload.py       JSON/text PostgreSQL cannot hold (NUL, lone surrogates, NaN) -> lossy + exact text (pure)
    db.py            engine from a postgresql:// URL, alembic upgrade/current/head
    embedded.py      embedded PostgreSQL for `make run` without BRIDGE_DATABASE_URL

Contract used by the rest of the daemon:

    from bridge.store.db import make_engine, upgrade_to_head, schema_is_at_head
    from bridge.store.embedded import start_embedded        # -> EmbeddedPostgres(url, stop())
    from bridge.store.events_store import EventStore, LeaseLost, BatchResult, SessionRow
"""
