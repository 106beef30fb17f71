"""JSONL export of a session and verification of exports. Pure apart from the file objects passed in.

Line 1 is a header, then one line per stored event in seq order, then a trailer with the chain head:

    {"format": "opencode-bridge-export/1", "upstream": …, "session": {…}, "exported_at": …}
    {"seq": …, "event_id": …, "type": …, "kind": …, …, "payload": {…}, "payload_text": "…", "chain_hash": …}
    {"end": true, "events": N, "head": "<last chain link>"}

`payload_text` is the exact text the chain hashed (PostgreSQL's canonical jsonb text); `payload` is the
same value parsed, for readers. Verifying a file recomputes the chain from `payload_text`, checks that
`payload` still says the same, and that the trailer's head and count match.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import IO, Any

from bridge.errors import ExportError
from bridge.store.hash_chain import ChainReport, ChainRow, verify_chain

FORMAT = "opencode-bridge-export/1"


def _default(o: object) -> Any:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def dump_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":")) + "\n"


def header(upstream: str, session: dict[str, Any], exported_at: datetime) -> str:
    return dump_line({"format": FORMAT, "upstream": upstream, "session": session, "exported_at": exported_at})


def event_line(row: dict[str, Any], payload_text: str) -> str:
    return dump_line({**row, "payload_text": payload_text})


def trailer(events: int, head: str) -> str:
    return dump_line({"end": True, "events": events, "head": head})


def read_export(lines: Iterable[str]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    it: Iterator[str] = iter(lines)
    try:
        head = json.loads(next(it))
    except (StopIteration, ValueError) as e:
        raise ExportError(f"not an export file: {e}") from None
    if head.get("format") != FORMAT:
        raise ExportError(f"unknown format {head.get('format')!r}")
    events: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    for n, line in enumerate(it, start=2):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ExportError(f"line {n}: {e}") from None
        if obj.get("end") is True:
            end = obj
        else:
            events.append(obj)
    return head, events, end


def verify_export(fh: IO[str]) -> tuple[ChainReport, list[str]]:
    """The chain report of the file's events, and problems outside the chain (edited `payload`,
    missing trailer, count or head mismatch)."""
    _, events, end = read_export(fh)
    problems: list[str] = []
    for e in events:
        if json.loads(e["payload_text"]) != e.get("payload"):
            problems.append(f"seq {e['seq']}: payload differs from payload_text")
    report = verify_chain(ChainRow(int(e["seq"]), str(e["event_id"]), str(e["payload_text"]), e.get("chain_hash"))
                          for e in events)
    if end is None:
        problems.append("no trailer line: the file is truncated")
    else:
        if end.get("events") != len(events):
            problems.append(f"trailer says {end.get('events')} events, the file has {len(events)}")
        if report.ok and end.get("head") != report.head:
            problems.append("trailer head does not match the recomputed chain")
    return report, problems
