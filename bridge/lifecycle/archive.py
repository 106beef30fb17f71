"""Archives (docs/lifecycle.md, "Archives"): a session written as one gzip-compressed file in the format of
`opencode-bridge export` (bridge.audit.export: a header, one JSON line per stored event with the exact
text its hash chain link covers, a trailer with the chain head), which `opencode-bridge verify --file`
checks. Written to `<name>.tmp`, flushed to disk, then renamed: a file under its final name is whole.
"""

from __future__ import annotations

import gzip
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from bridge.audit.export import event_line, header, trailer
from bridge.store.hash_chain import GENESIS
from bridge.store.reads import AuditReader

SUFFIX = ".jsonl.gz"


def archive_path(directory: Path, session_id: str) -> Path:
    """`<dir>/<session_id>.jsonl.gz` (session ids are `[A-Za-z0-9_-]`, bridge.ids)."""
    return directory / f"{session_id}{SUFFIX}"


async def write_export(reader: AuditReader, session_id: str, fh: IO[str], now: datetime | None = None) -> int:
    """The session's export into `fh`; returns the number of events (0 and no file when it has no row)."""
    session = await reader.session(session_id)
    if session is None:
        raise LookupError(f"no session {session_id!r} in the mirror")
    fh.write(header(reader.upstream, session, now or datetime.now(UTC)))
    texts = {r.seq: r.payload_text for r in await reader.chain_rows(session_id)}
    head, n = GENESIS, 0
    async for row in reader.all_events(session_id):
        fh.write(event_line(row, texts[int(row["seq"])]))
        head = row["chain_hash"] or head
        n += 1
    fh.write(trailer(n, head))
    return n


async def archive_session(reader: AuditReader, session_id: str, directory: Path) -> tuple[Path, int]:
    """Write the session's archive file; (its path, events written)."""
    os.makedirs(directory, exist_ok=True)  # an operator command, off the daemon
    final = archive_path(directory, session_id)
    tmp = final.with_name(final.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        n = await write_export(reader, session_id, fh)
    with open(tmp, "rb") as raw:  # noqa: ASYNC230 - one fsync per archived session, off the daemon
        os.fsync(raw.fileno())
    os.replace(tmp, final)
    return final, n
