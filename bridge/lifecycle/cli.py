"""`opencode-bridge erase | archive | retention | partition-migrate` (docs/lifecycle.md; runbook:
docs/operations.md "Retention").

Each talks to the database directly (migrations applied first) and never needs the daemon: an erasure
reaches every running process through PostgreSQL (the tombstone, the `erased` status notice)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import structlog

from bridge import metrics
from bridge.config import Settings
from bridge.errors import SessionNotFound
from bridge.ids import SESSION_ID_RULE, valid_session_id
from bridge.lifecycle.archive import archive_session
from bridge.lifecycle.retention import RetentionReport, run_retention
from bridge.store.db import make_engine, migrate_database
from bridge.store.lifecycle import erase_session, retire_candidates
from bridge.store.partition_moves import migrate_to_partitions
from bridge.store.reads import AuditReader

COMMANDS = ("erase", "archive", "retention", "partition-migrate")
_log = structlog.get_logger("bridge.lifecycle")


def add_parsers(sub: Any) -> None:
    e = sub.add_parser("erase", help="erase a session and its subagents' sessions from the mirror, for good")
    e.add_argument("--session", required=True, metavar="ID")
    e.add_argument("--reason", required=True, help="why (kept in the tombstone)")
    e.add_argument("--by", default=None, help="who asked (kept in the tombstone; default: cli:<login>)")
    e.add_argument("--upstream", action="store_true", help="also delete the session on the serve")
    a = sub.add_parser("archive", help="write sessions whose last event is before DATE as .jsonl.gz exports")
    a.add_argument("--before", required=True, type=_time, metavar="DATE", help="ISO date or time (UTC if no zone)")
    a.add_argument("--to", required=True, type=Path, metavar="DIR")
    r = sub.add_parser("retention", help="remove whole sessions older than BRIDGE_RETENTION_DAYS")
    r.add_argument("--days", type=_positive, default=None, help="override BRIDGE_RETENTION_DAYS")
    r.add_argument("--dry-run", action="store_true", help="count what would leave; change nothing")
    r.add_argument("--archive-to", type=Path, default=None, metavar="DIR", help="archive each session first")
    r.add_argument("--metrics-file", type=Path, default=None, metavar="PATH",
                   help="write the run's metrics there (Prometheus text format, for node_exporter's textfile "
                        "collector)")
    m = sub.add_parser("partition-migrate", help="move the sessions stored before partitions into their day "
                                                 "partitions, online (docs/lifecycle.md, \"Partitions\")")
    m.add_argument("--page", type=_positive, default=50, help="sessions moved per transaction")


def _positive(raw: str) -> int:
    n = int(raw)
    if n <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of days")
    return n


def _login() -> str:
    try:
        return getpass.getuser()
    except OSError:  # no login name and no passwd entry (a bare container)
        return "unknown"


def _time(raw: str) -> datetime:
    t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def run(args: argparse.Namespace, settings: Settings, url: str, out: IO[str] = sys.stdout,
        err: IO[str] = sys.stderr) -> int:
    if args.command == "erase" and not valid_session_id(args.session):
        err.write(f"opencode-bridge erase: --session: {SESSION_ID_RULE}\n")
        return 2
    if args.command == "erase" and not args.reason.strip():
        err.write("opencode-bridge erase: --reason must not be empty\n")
        return 2
    days = getattr(args, "days", None) or settings.retention_days  # both positive when set
    if args.command == "retention" and days <= 0:
        out.write("retention: BRIDGE_RETENTION_DAYS is unset: every session is kept\n")
        return 0
    return asyncio.run(_run(args, settings, url, days, out))


async def _run(args: argparse.Namespace, settings: Settings, url: str, days: int, out: IO[str]) -> int:
    await migrate_database(url)
    engine = make_engine(url, pool_size=2)
    try:
        if args.command == "erase":
            return await _erase(args, settings, engine, out)
        if args.command == "partition-migrate":
            moved = await migrate_to_partitions(engine, settings.upstream_name, page=args.page)
            _log.info("partition_migrate", **moved.fields())
            out.write(json.dumps({"partition_migrate": moved.fields()}) + "\n")
            return 0
        reader = AuditReader(engine, settings.upstream_name)
        if args.command == "archive":
            return await _archive(args, settings, engine, reader, out)
        cutoff = datetime.now(UTC) - timedelta(days=days)
        report = await run_retention(engine, reader, settings.upstream_name, cutoff, dry_run=args.dry_run,
                                     archive_to=args.archive_to)
        out.write(json.dumps({"retention": report.log_fields(), "rows": dict(report.rows)}) + "\n")
        if args.metrics_file is not None:
            write_metrics(args.metrics_file, report)
        return 0
    finally:
        await engine.dispose()


async def _erase(args: argparse.Namespace, settings: Settings, engine: Any, out: IO[str]) -> int:
    by = args.by or f"cli:{_login()}"
    done = await erase_session(engine, settings.upstream_name, args.session, erased_by=by, reason=args.reason)
    metrics.SESSIONS_ERASED.labels(via="cli").inc(len(done.sessions))
    _log.info("session_erased", session_id=args.session, sessions=len(done.sessions), rows=done.total,
              subject=by, already=done.already)
    summary: dict[str, Any] = {**done.summary(), "rows_by_session": done.rows}
    if args.upstream:
        summary["upstream_deleted"] = await _delete_upstream(settings, args.session)
    out.write(json.dumps(summary) + "\n")
    return 0


async def _delete_upstream(settings: Settings, session_id: str) -> bool:
    """`DELETE /session/{id}` on the serve; False when it has no such session."""
    from bridge.upstream.client import UpstreamClient
    from bridge.upstream.commands import UpstreamCommands

    async with UpstreamClient(settings.upstream_url, settings.upstream_username,
                              settings.upstream_password.value) as client:
        try:
            await UpstreamCommands(client).session_op(session_id, "", "DELETE", "", None)
        except SessionNotFound:
            return False
    return True


async def _archive(args: argparse.Namespace, settings: Settings, engine: Any, reader: AuditReader,
                   out: IO[str]) -> int:
    after, files = "", 0
    while True:
        async with engine.connect() as conn:
            page = await retire_candidates(conn, settings.upstream_name, args.before, after=after, limit=100)
        if not page:
            break
        after = page[-1].session_id
        for c in page:
            path, n = await archive_session(reader, c.session_id, args.to)
            out.write(f"{path}: {n} events\n")
            files += 1
    out.write(f"archive: {files} sessions written to {args.to}\n")
    return 0


def write_metrics(path: Path, report: RetentionReport) -> None:
    """The run's numbers for node_exporter's textfile collector (written whole, then renamed)."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    reg = CollectorRegistry()
    Gauge("bridge_retention_last_run_timestamp_seconds", "End of the last retention run", registry=reg) \
        .set(datetime.now(UTC).timestamp())
    Gauge("bridge_retention_last_run_seconds", "Duration of the last retention run", registry=reg) \
        .set(report.seconds)
    Gauge("bridge_retention_sessions_removed", "Sessions removed by the last run", registry=reg).set(report.sessions)
    Gauge("bridge_retention_sessions_skipped", "Candidates that stopped qualifying during the last run",
          registry=reg).set(report.skipped)
    rows = Gauge("bridge_retention_rows_removed", "Rows removed by the last run, by table", ["table"], registry=reg)
    for table, n in report.rows.items():
        rows.labels(table=table).set(n)
    Gauge("bridge_retention_dry_run", "1 if the last run changed nothing (--dry-run)", registry=reg) \
        .set(1 if report.dry_run else 0)
    write_to_textfile(str(path), reg)
