"""Prometheus metrics (base units, `_total` counters, no session ids in labels)."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

REGISTRY = CollectorRegistry(auto_describe=True)
# Worker processes (docs/operations.md "Workers"): with PROMETHEUS_MULTIPROC_DIR set before this module is
# imported every value lives in a file of that directory, and `/metrics` adds up all the workers' files. Each
# gauge says how (`multiprocess_mode`): sums of what each worker holds (`livesum`), the worst of them
# (`livemax`), or the latest write (`livemostrecent`); `live*`: the files of workers that died are left out.
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def exposition() -> bytes:
    """The text of `/metrics`: this process's registry, or every worker's values when they share a directory."""
    path = os.environ.get(MULTIPROC_DIR_ENV)
    if not path:
        return generate_latest(REGISTRY)
    merged = CollectorRegistry()
    MultiProcessCollector(merged, path)  # type: ignore[no-untyped-call]
    return generate_latest(merged)

EVENTS_INGESTED = Counter(
    "bridge_events_ingested_total",
    "Durable events committed to chat_session_events, by normalized kind and source",
    ["kind", "source"],
    registry=REGISTRY,
)
EVENTS_DUPLICATE = Counter(
    "bridge_events_duplicate_total", "Identical events seen again (benign)", registry=REGISTRY
)
REJECTS = Counter(
    "bridge_rejects_total", "Frames or events set aside in chat_event_rejects, by reason", ["reason"],
    registry=REGISTRY,
)
UNKNOWN_EVENTS = Counter(
    "bridge_unknown_events_total", "Events of a type the mapper does not know (stored as kind unknown)",
    ["stream"], registry=REGISTRY,
)
UPSTREAM_RECONNECTS = Counter(
    "bridge_upstream_reconnects_total", "Reconnects of upstream streams, by stream and cause",
    ["stream", "cause"], registry=REGISTRY,
)
DURABLE_STALL_HOLDS = Counter(
    "bridge_durable_stall_holds_total",
    "Durable streams late past BRIDGE_DURABLE_STALL_S that the stall watchdog kept open (why: backlog = the "
    "process serves every stream that late, budget = stall reconnects rate-limited), once per wait",
    ["why"], registry=REGISTRY,
)
LEASE_LOSSES = Counter(
    "bridge_lease_losses_total", "Write batches refused because the lease epoch moved on", registry=REGISTRY
)
STANDBY_ROWS = Counter(
    "bridge_standby_replay_rows_total",
    "Rows of WebSocket replays read from the standby (BRIDGE_READ_DATABASE_URL) instead of the primary",
    registry=REGISTRY,
)
STANDBY_FALLBACKS = Counter(
    "bridge_standby_read_failures_total",
    "WebSocket replay pages the standby could not serve (down, timeout), read from the primary instead",
    registry=REGISTRY,
)
CURSOR_REWINDS = Counter(
    "bridge_cursor_rewinds_total",
    "Followers that found the database holding less than they wrote (commits lost in a failover) and re-read "
    "the sync log from the stored cursor; cause: write (a batch refused) | reconnect (checked after the "
    "database came back)",
    ["cause"], registry=REGISTRY,
)
BATCH_SIZE = Histogram(
    "bridge_write_batch_events", "Events per write transaction", registry=REGISTRY,
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500),
)
COMMIT_SECONDS = Histogram(
    "bridge_commit_duration_seconds", "Duration of one write transaction", registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
GROUP_COMMIT_WAITING = Gauge(
    "bridge_group_commit_waiting_writes",
    "Sessions' batches queued for a group-commit transaction (waiting for a slot or their session's previous "
    "group): steadily high means the database does not keep up with the ingest",
    multiprocess_mode="livesum", registry=REGISTRY,
)
GROUP_WRITES = Histogram(
    "bridge_group_commit_writes", "Sessions' batches per group-commit transaction", registry=REGISTRY,
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)
GROUP_SECONDS = Histogram(
    "bridge_group_commit_duration_seconds", "Duration of one group-commit transaction", registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
GROUP_ROWS = Counter(
    "bridge_group_commit_rows_total",
    "Event rows sent to chat_session_events, by how: copy (COPY, the fast path) or insert (INSERT … ON CONFLICT: "
    "a clash in the group, a payload only PostgreSQL can print, or COPY refused)", ["path"], registry=REGISTRY,
)
COPY_REFUSED = Counter(
    "bridge_group_commit_copy_refused_total",
    "Groups whose COPY PostgreSQL or the driver refused (the rows then took the INSERT path), by exception: "
    "UniqueViolationError is a replayed or clashing event, anything else is worth a look", ["reason"],
    registry=REGISTRY,
)
UPSTREAM_TO_COMMIT = Histogram(
    "bridge_upstream_to_commit_seconds", "From the upstream event timestamp to our commit",
    registry=REGISTRY, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
SESSIONS_WARM = Gauge("bridge_sessions_warm", "Sessions with a running durable follower",
                      multiprocess_mode="livesum", registry=REGISTRY)
FOLLOWER_CRASHES = Counter(
    "bridge_follower_crashes_total", "Followers that died on an unexpected error and were restarted",
    registry=REGISTRY,
)

# --- operations (docs/operations.md) ------------------------------------------------------------------------------
EVENT_LOOP_LAG = Gauge(
    "bridge_event_loop_lag_seconds", "How late the health task woke up on its last tick",
    multiprocess_mode="livemax", registry=REGISTRY
)
HEALTH_CHECKS_FAILED = Counter(
    "bridge_health_checks_failed_total", "Health ticks that withheld the systemd watchdog", registry=REGISTRY
)
AUDIT_REQUESTS = Counter(
    "bridge_audit_requests_total", "Audit API requests, by route and status", ["route", "status"], registry=REGISTRY
)
# Warm-session lifecycle (docs/lifecycle.md).
LEASE_CLAIMS = Counter(
    "bridge_lease_claims_total", "Leases taken, by what warmed the session (orphan = adoption)", ["reason"],
    registry=REGISTRY,
)
SESSIONS_UNKNOWN = Counter(
    "bridge_sessions_unknown_upstream_total",
    "Warmed session ids the upstream answered 404 for while nothing of them was stored (not tombstoned)",
    registry=REGISTRY,
)
SESSION_RELEASES = Counter(
    "bridge_session_releases_total", "Warm sessions released (follower stopped, lease freed), by reason",
    ["reason"], registry=REGISTRY,
)
SESSION_STATUS = Counter(
    "bridge_session_status_total", "Session status transitions, by new status", ["status"], registry=REGISTRY
)
SESSION_GAPS = Counter(
    "bridge_session_gaps_total", "Seq gaps recorded: seqs the sync log itself lacks (the mirror is incomplete there)",
    registry=REGISTRY,
)
READY = Gauge(
    "bridge_ready", "1 when /readyz answers 200, 0 otherwise (evaluated at every /metrics scrape)",
    multiprocess_mode="livemostrecent", registry=REGISTRY
)

# --- hostile input and resource bounds (docs/operations.md, "Limits") -----------------------------------
BAD_SESSION_IDS = Counter(
    "bridge_bad_session_ids_total", "Client-supplied session ids refused for their shape, by surface (ws, http)",
    ["surface"], registry=REGISTRY,
)
HTTP_REFUSED = Counter(
    "bridge_http_refused_total",
    "HTTP requests or connections refused by a bound (bad_host, connections, busy:<route>, too_large)",
    ["reason"], registry=REGISTRY,
)
TOKENS_REFUSED = Counter(
    "bridge_tokens_refused_total", "Tokens refused on HTTP or the WebSocket, by reason (invalid, expired, revoked, …)",
    ["reason"], registry=REGISTRY,
)
REVOCATION_REFRESH_FAILURES = Counter(
    "bridge_revocation_refresh_failures_total",
    "Reloads of the revocation list that failed (the last list stays in force)", registry=REGISTRY,
)
SESSIONS_PARKED = Counter(
    "bridge_sessions_parked_total",
    "Sessions parked: their follower kept failing, so it is no longer retried until warmed explicitly",
    registry=REGISTRY,
)
DISCOVERY_FAILURES = Counter(
    "bridge_discovery_failures_total", "Session discovery runs that failed (retried with backoff)",
    registry=REGISTRY,
)
FOLLOWERS_STUCK = Counter(
    "bridge_follower_no_progress_total",
    "Catch-up passes that could not move the cursor (every event of a page rejected, or a page over the "
    "body bound), by reason; after a few in a row the follower stops with `stuck`",
    ["reason"], registry=REGISTRY,
)

# --- one cursor, two sources (docs/mirror.md) --------------------------------------------------------
SYNC_REPAIRS = Counter(
    "bridge_sync_repairs_total",
    "Reads of a session's sync log (POST /sync/history) to fill seqs the durable stream or the live twins "
    "did not give in order, by cause",
    ["cause"], registry=REGISTRY,
)
CATCHUPS_SKIPPED = Counter(
    "bridge_catchups_skipped_total", "Followers that started without reading the sync log: /global/event had "
    "shown every seq above their cursor while they were claimed (docs/mirror.md \"A repair only for a real hole\")",
    registry=REGISTRY,
)
SYNC_REPAIRED_EVENTS = Counter(
    "bridge_sync_repaired_events_total", "Events stored from the sync log by repairs", registry=REGISTRY,
)
SESSION_STRUCTURES = Gauge(
    "bridge_session_structures", "Sessions held by each per-session structure of the daemon (warm sessions, "
    "status machines, indexes, marks; known_to_sync: sessions named in sync-log bodies, bounded): each follows "
    "the warm sessions and none grows with sessions cycled (docs/operations.md \"Memory for weeks\")",
    ["what"], multiprocess_mode="livesum", registry=REGISTRY,
)
SESSION_DB_WAITING = Gauge(
    "bridge_session_db_waiting",
    "Sessions waiting for a turn at the database (at most SESSION_DB_AT_ONCE run their claim, catch-up or "
    "release at once; docs/lifecycle.md \"Warm-up\"): high while many sessions warm at once",
    multiprocess_mode="livesum", registry=REGISTRY,
)
REQUEST_RESYNC_PASSES = Counter(
    "bridge_request_resync_passes_total",
    "Passes that re-read the pending permission/question requests (and kept todo/diff state) from the serve: "
    "after every live-stream (re)connect and for new subscribers (docs/websocket.md)",
    registry=REGISTRY,
)
CLAIM_BATCHES = Counter(
    "bridge_claim_batches_total", "Claim transactions (each takes the leases of many warming sessions at once)",
    registry=REGISTRY,
)
CLAIM_BATCH_SESSIONS = Histogram(
    "bridge_claim_batch_sessions", "Sessions one claim transaction asked for (docs/lifecycle.md \"Warm-up\")",
    registry=REGISTRY, buckets=(1, 2, 5, 10, 50, 100, 200),
)
SYNC_CALLS = Counter(
    "bridge_sync_calls_total", "POST /sync/history calls (each asks for the logs of many sessions at once)",
    registry=REGISTRY,
)
LIVE_FRAMES_PEEKED = Counter(
    "bridge_live_frames_peeked_total", "/global/event frames handled from their first bytes, not decoded: bus "
    "copies of persisted v2 events skipped, v2 sync twins read", ["what"], registry=REGISTRY,
)
LIVE_FRAMES_SKIPPED = Counter(
    "bridge_live_frames_skipped_total", "/global/event frames of a session this process neither follows nor "
    "serves, dropped before decoding (docs/operations.md \"Workers\"): held by a peer, deleted, parked",
    ["reason"], registry=REGISTRY,
)
SYNC_CALL_FAILURES = Counter(
    "bridge_sync_call_failures_total", "POST /sync/history calls the upstream could not answer (asked again)",
    registry=REGISTRY,
)
SYNC_REQUEST_BYTES = Counter(
    "bridge_sync_request_bytes_total", "Request body bytes of POST /sync/history", registry=REGISTRY,
)
SYNC_ITEMS_ANSWERED = Counter(
    "bridge_sync_items_answered_total", "Items the POST /sync/history answers held, every aggregate's (an answer "
    "also holds the whole log of every session its body could not name: docs/mirror.md \"What a repair costs\")",
    registry=REGISTRY,
)
SYNC_ITEMS_KEPT = Counter(
    "bridge_sync_items_kept_total", "Items of POST /sync/history answers that belonged to an asked session "
    "(kept; the rest were dropped as they were read): answered / kept is what a repair's item cost",
    registry=REGISTRY,
)
SYNC_ANSWER_BYTES = Counter(
    "bridge_sync_answer_bytes_total", "Response body bytes of POST /sync/history", registry=REGISTRY,
)
SYNC_ANSWERS_WHOLE = Counter(
    "bridge_sync_answers_read_whole_total", "POST /sync/history answers read whole and decoded by the stdlib "
    "because the streaming reader could not read them exactly (NaN, 64-bit overflow, lone surrogates, bad UTF-8)",
    registry=REGISTRY,
)
SYNC_PACED_SECONDS = Counter(
    "bridge_sync_paced_seconds_total", "Seconds POST /sync/history calls waited for the item budget "
    "(BRIDGE_SYNC_ITEMS_PER_S: what the serve spends answering is paced)", registry=REGISTRY,
)
SYNC_CALL_SESSIONS = Histogram(
    "bridge_sync_call_sessions", "Sessions whose sync log one POST /sync/history asked for", registry=REGISTRY,
    buckets=(1, 2, 5, 10, 50, 100, 500, 1000, 2000),
)
TWINS_WRITTEN = Counter(
    "bridge_twin_events_total", "Exact sync twins from /global/event stored directly (no REST call)",
    registry=REGISTRY,
)
TWIN_HOLDS = Counter(
    "bridge_twin_holds_total", "Exact sync twins that waited above a hole: filled by the durable stream, or "
    "the sync log was asked (docs/mirror.md rule 3)", ["outcome"], registry=REGISTRY,
)
DURABLE_HELD = Counter(
    "bridge_durable_events_held_total", "Durable-stream events that arrived above seqs /global/event had not shown "
    "yet (it runs behind under load) and waited with the twins instead of asking the sync log (docs/mirror.md)",
    registry=REGISTRY,
)
SYNC_LOG_HOLES = Counter(
    "bridge_sync_log_holes_total", "Holes in a session's sync log itself: recorded as gaps, skipped",
    registry=REGISTRY,
)

# Pending requests: permission requests and questions the agent waits for (docs/operations.md).
QUESTIONS = Counter(
    "bridge_questions_total", "Question state changes relayed (asked, answered, rejected, unknown)", ["state"],
    registry=REGISTRY,
)
PENDING_REQUESTS = Gauge(
    "bridge_pending_requests", "Requests pending (waiting for a person), by kind", ["kind"],
    multiprocess_mode="livemax", registry=REGISTRY,
)
PENDING_OLDEST_SECONDS = Gauge(
    "bridge_pending_request_oldest_seconds", "Age of the oldest pending request, by kind (0: none)", ["kind"],
    multiprocess_mode="livemax", registry=REGISTRY,
)
# Prompts on both runtimes (docs/commands.md, "The legacy queue").
QUEUED_PROMPT_SEND_SECONDS = Histogram(
    "bridge_queued_prompt_send_seconds",
    "A queued legacy prompt: from the end of the turn it waited for (upstream's time) to its send",
    registry=REGISTRY, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
PROMPTS = Counter(
    "bridge_prompts_total", "Prompts sent through the bridge, by runtime and how they went",
    ["runtime", "outcome"], registry=REGISTRY,
)

GC_FULL_COLLECT_SECONDS = Histogram(
    "bridge_gc_full_collect_seconds",
    "Duration of the periodic full collection of the unfrozen heap (a pause of the event loop)",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0),
    registry=REGISTRY,
)


# --- data lifecycle (docs/lifecycle.md, "Erasure"; retention runs write their own, docs/operations.md) ------
SESSIONS_ERASED = Counter(
    "bridge_sessions_erased_total", "Sessions erased from the mirror (each subagent session counts), by way",
    ["via"], registry=REGISTRY,
)
# Partitions of chat_session_events (docs/lifecycle.md, "Partitions"): made ahead by every bridge.
PARTITIONS_CREATED = Counter(
    "bridge_partitions_created_total", "Day partitions of chat_session_events created by this process",
    registry=REGISTRY,
)
PARTITION_DEFAULT_ROWS = Gauge(
    "bridge_partition_default_rows", "Event rows in the default partition (a day without its partition): "
    "should be 0", registry=REGISTRY,
)
PARTITION_ERRORS = Counter(
    "bridge_partition_errors_total", "Partition upkeep that failed (retried at the next round), by step",
    ["step"], registry=REGISTRY,
)
