"""CLI twins of the audit API: `sessions`, `events`, `transcript`, `export`, `verify`.

Each reads the database directly (read-only) through `bridge.store.reads.audit.AuditReader`.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import zlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import IO, Any

from bridge.audit.export import event_line, header, trailer, verify_export
from bridge.audit.render import render_transcript
from bridge.audit.transcript import build_transcript
from bridge.errors import ExportError
from bridge.store.hash_chain import GENESIS, verify_chain
from bridge.store.reads import AuditReader, SessionFilter

COMMANDS = ("sessions", "events", "transcript", "export", "verify")


def add_parsers(sub: Any) -> None:
    s = sub.add_parser("sessions", help="list mirrored sessions")
    s.add_argument("--status", help="only this status (idle, running, stalled, deleted, …)")
    s.add_argument("--since", type=_time, help="with an event at or after this ISO time")
    s.add_argument("--until", type=_time, help="with an event before this ISO time")
    s.add_argument("--limit", type=int, default=1000)
    s.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    e = sub.add_parser("events", help="stored events of a session, as JSON lines")
    e.add_argument("session")
    e.add_argument("--after", type=int, default=0, help="only seq > AFTER")
    e.add_argument("--limit", type=int, default=1000)
    t = sub.add_parser("transcript", help="the conversation of a session, rebuilt from stored events")
    t.add_argument("session")
    t.add_argument("--json", action="store_true", help="the same JSON as GET /v1/sessions/{id}/transcript")
    x = sub.add_parser("export", help="export a session as JSONL (with its hash chain)")
    x.add_argument("session")
    x.add_argument("-o", "--output", help="file to write (default: stdout)")
    x.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    v = sub.add_parser("verify", help="check the hash chain; report the first broken link")
    v.add_argument("session", nargs="*", help="sessions to check (default: every session)")
    v.add_argument("--file", help="verify an export file instead of the database")


def _time(raw: str) -> datetime:
    t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _default(o: object) -> Any:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(type(o).__name__)


# Opens the reader (and whatever it needs: engine, embedded database); returns it and its closer.
ReaderFactory = Callable[[], Awaitable[tuple[AuditReader, Callable[[], Awaitable[None]]]]]


def run(args: argparse.Namespace, reader_factory: ReaderFactory, out: IO[str] = sys.stdout,
        err: IO[str] = sys.stderr) -> int:
    if args.command == "verify" and args.file:
        return _verify_file(args.file, out, err)

    async def main() -> int:
        reader, close = await reader_factory()
        try:
            return await _dispatch(args, reader, out, err)
        finally:
            await close()

    return asyncio.run(main())


async def _dispatch(args: argparse.Namespace, reader: AuditReader, out: IO[str], err: IO[str]) -> int:
    if args.command == "sessions":
        rows = await reader.sessions(SessionFilter(status=args.status, since=args.since, until=args.until,
                                                   limit=args.limit))
        for r in rows:
            if args.json:
                out.write(json.dumps(r, default=_default) + "\n")
            else:
                last = r["last_event_at"].isoformat(timespec="seconds") if r["last_event_at"] else "-"
                out.write(f"{r['session_id']}  {r['status']:<9} seq={r['cursor_seq']:<6} last={last}"
                          f"{'  deleted' if r['deleted'] else ''}\n")
        return 0
    if args.command == "verify":
        return await _verify_db(args.session or await reader.session_ids(), reader, out)
    if await reader.session(args.session) is None:
        err.write(f"opencode-bridge {args.command}: no session {args.session!r} in the mirror\n")
        return 1
    if args.command == "events":
        for r in await reader.events(args.session, args.after, args.limit):
            out.write(json.dumps(r, default=_default, ensure_ascii=False) + "\n")
        return 0
    if args.command == "transcript":
        rows = [r async for r in reader.all_events(args.session)]
        entries = build_transcript(rows)
        if args.json:
            out.write(json.dumps({"session_id": args.session, "events": len(rows), "entries": entries},
                                 default=_default, ensure_ascii=False) + "\n")
        else:
            out.write(render_transcript(entries))
        return 0
    return await _export(args, reader, out, err)


async def _export(args: argparse.Namespace, reader: AuditReader, out: IO[str], err: IO[str]) -> int:
    session = await reader.session(args.session)
    assert session is not None
    total = await reader.count_events(args.session)
    show = err.isatty() if args.progress is None else args.progress
    fh: IO[str] = open(args.output, "w", encoding="utf-8") if args.output else out  # noqa: SIM115, ASYNC230
    try:
        fh.write(header(reader.upstream, session, datetime.now(UTC)))
        texts = {r.seq: r.payload_text for r in await reader.chain_rows(args.session)}
        head, n = GENESIS, 0
        async for row in reader.all_events(args.session):
            fh.write(event_line(row, texts[int(row["seq"])]))
            head = row["chain_hash"] or head
            n += 1
            if show and (n % 500 == 0 or n == total):
                _progress(err, n, total)
        fh.write(trailer(n, head))
    finally:
        if args.output:
            fh.close()
    if show:
        err.write("\n")
    return 0


def _progress(err: IO[str], n: int, total: int) -> None:
    width = 30
    done = width * n // max(total, 1)
    err.write(f"\rexport [{'#' * done}{'.' * (width - done)}] {n}/{total} events")
    err.flush()


async def _verify_db(sessions: list[str], reader: AuditReader, out: IO[str]) -> int:
    broken = 0
    for sid in sessions:
        r = verify_chain(await reader.chain_rows(sid))
        if r.ok:
            out.write(f"{sid}: ok, {r.events} events, head {r.head}\n")
        else:
            assert r.broken is not None
            broken += 1
            out.write(f"{sid}: BROKEN at seq {r.broken.seq} (event {r.broken.event_id}): {r.broken.reason}; "
                      f"links before it are intact (last good head {r.head})\n")
    return 1 if broken else 0


def _open_export(path: str) -> IO[str]:
    """An export file, plain or gzip-compressed (archives, docs/lifecycle.md "Archives")."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if compressed else open(path, encoding="utf-8")


def _verify_file(path: str, out: IO[str], err: IO[str]) -> int:
    try:
        with _open_export(path) as fh:
            report, problems = verify_export(fh)
    except (OSError, EOFError, zlib.error, ExportError, UnicodeDecodeError) as e:  # a damaged archive, too
        err.write(f"opencode-bridge verify: {path}: {type(e).__name__}: {e}\n")
        return 2
    if report.broken is not None:
        b = report.broken
        out.write(f"{path}: BROKEN at seq {b.seq} (event {b.event_id}): {b.reason}\n")
    for p in problems:
        out.write(f"{path}: {p}\n")
    if report.ok and not problems:
        out.write(f"{path}: ok, {report.events} events, head {report.head}\n")
        return 0
    return 1
