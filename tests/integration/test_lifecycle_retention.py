"""Retention and archives (docs/lifecycle.md, "Retention", "Archives") on a real PostgreSQL, with sessions
across several days — their age set through the events' own times, never by waiting: exactly the old
sessions that are not in use leave, with every row of every table; the archive files verify and a flipped
byte does not; the chains of what stays still verify."""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.audit import cli as audit_cli
from bridge.cli import _parser
from bridge.config import Settings
from bridge.lifecycle import cli as lifecycle_cli
from bridge.store import partitions
from bridge.store.chat_sessions import LeaseStore
from bridge.store.commands_pending.pending import upsert_permission_asked
from bridge.store.hash_chain import verify_chain
from bridge.store.lifecycle.removal import SESSION_TABLES
from bridge.store.reads import AuditReader
from bridge.store.session_errors import SessionErrorStore
from bridge.store.writes import EventStore
from tests.support.chat_events import chat_event

UPSTREAM = "it-retention"
NOW = datetime.now(UTC)
OLD, OLD_WARM, OLD_PENDING, OLD_QUEUED, RECENT = (
    "ses_ret_old", "ses_ret_warm", "ses_ret_pending", "ses_ret_queued", "ses_ret_recent")
AGE_DAYS = {OLD: 40, OLD_WARM: 41, OLD_PENDING: 42, OLD_QUEUED: 43, RECENT: 2}


async def _session(store: EventStore, engine: AsyncEngine, sid: str, days_ago: int, *, release: bool = True,
                   day: date | None = None) -> None:
    """Three events stamped `days_ago` days back (their own `timestamp`), and a row in every side table;
    `day`: the session's partition day, set through the data before its first event."""
    epoch, _ = await store.claim(sid, "owner", "/srv/p", lease_ttl_s=3600)
    if day is not None:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE chat_sessions SET session_day = :d WHERE upstream = :u AND session_id = :s")
                               .bindparams(d=day, u=UPSTREAM, s=sid))
    ms = int((NOW - timedelta(days=days_ago)).timestamp() * 1000)
    events = [chat_event(s, session_id=sid, data={"timestamp": ms + s}) for s in (1, 2, 3)]
    await store.write_batch(sid, epoch, events, NOW - timedelta(days=days_ago))
    await SessionErrorStore(engine, UPSTREAM).record(sid, f"err_{sid}", "E", "m", {"type": "session.error"}, NOW)
    await store.reject_frame(sid, "bad_json", "{", NOW)
    await LeaseStore(engine, UPSTREAM).record_gap(sid, 7, 8)
    async with engine.begin() as conn:  # an answered permission and a finished command
        await conn.execute(upsert_permission_asked({"upstream": UPSTREAM, "request_id": f"per_{sid}",
                                                    "session_id": sid, "asked_at": NOW}))
        await conn.execute(text("UPDATE chat_permission_requests SET reply = 'once' WHERE request_id = :r")
                           .bindparams(r=f"per_{sid}"))
        await _command(conn, sid, "c-done", "done")
    if release:
        await store.release(sid, epoch)


async def _command(conn: Any, sid: str, cid: str, state: str) -> None:
    await conn.execute(text(
        "INSERT INTO chat_commands (upstream, command_id, command, session_id, target_session, subject, scope, "
        "fingerprint, body, state) VALUES (:u, :c, 'prompt', :s, :s, 'alice', 'prompt', 'f', '{}', :st)"
    ).bindparams(u=UPSTREAM, c=cid, s=sid, st=state))


async def _fill(engine: AsyncEngine) -> None:
    store = EventStore(engine, UPSTREAM)
    for sid, days in AGE_DAYS.items():
        await _session(store, engine, sid, days, release=sid != OLD_WARM)
    async with engine.begin() as conn:
        await conn.execute(upsert_permission_asked({"upstream": UPSTREAM, "request_id": "per_open",
                                                    "session_id": OLD_PENDING, "asked_at": NOW}))
        await _command(conn, OLD_QUEUED, "c-queued", "queued")


async def _rows(engine: AsyncEngine, sid: str) -> dict[str, int]:
    out = {}
    async with engine.connect() as conn:
        for table, where in SESSION_TABLES.items():
            q = text(f"SELECT count(*) FROM {table} WHERE upstream = :u AND {where}")
            out[table] = int((await conn.execute(q.bindparams(u=UPSTREAM, ids=[sid]))).scalar_one())
    return out


def _cli(database_url: str, *argv: str) -> tuple[int, str]:
    args = _parser().parse_args(list(argv))
    out = io.StringIO()
    code = lifecycle_cli.run(args, Settings(upstream_name=UPSTREAM, retention_days=30), database_url, out=out)
    return code, out.getvalue()


def _verify_file(path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()

    async def no_reader() -> Any:
        raise AssertionError("verify --file reads no database")

    code = audit_cli.run(argparse.Namespace(command="verify", file=str(path)), no_reader, out=out, err=err)
    return code, out.getvalue() + err.getvalue()


async def test_retention_removes_exactly_the_old_sessions_not_in_use(engine: AsyncEngine, database_url: str,
                                                                tmp_path: Path) -> None:
    await _fill(engine)
    before = {sid: await _rows(engine, sid) for sid in AGE_DAYS}
    assert all(all(n > 0 for n in rows.values()) for rows in before.values()), before

    code, said = await asyncio.to_thread(_cli, database_url, "retention", "--dry-run")
    assert code == 0 and '"sessions": 1' in said and '"events": 3' in said
    assert {sid: await _rows(engine, sid) for sid in AGE_DAYS} == before  # a dry run changes nothing

    metrics_file = tmp_path / "retention.prom"
    code, said = await asyncio.to_thread(_cli, database_url, "retention", "--archive-to", str(tmp_path / "arch"),
                      "--metrics-file", str(metrics_file))
    assert code == 0, said
    assert await _rows(engine, OLD) == dict.fromkeys(SESSION_TABLES, 0)
    for sid in (OLD_WARM, OLD_PENDING, OLD_QUEUED, RECENT):
        assert await _rows(engine, sid) == before[sid], sid
    assert "bridge_retention_sessions_removed 1.0" in metrics_file.read_text()
    assert 'bridge_retention_rows_removed{table="chat_session_events"} 3.0' in metrics_file.read_text()

    archived = tmp_path / "arch" / f"{OLD}.jsonl.gz"
    code, said = _verify_file(archived)
    assert code == 0 and "ok, 3 events" in said, said

    async def chains() -> dict[str, bool]:
        reader = AuditReader(engine, UPSTREAM)
        return {sid: verify_chain(await reader.chain_rows(sid)).ok for sid in await reader.session_ids()}

    assert await chains() == dict.fromkeys([OLD_WARM, OLD_PENDING, OLD_QUEUED, RECENT], True)


async def test_archive_round_trip_and_a_flipped_byte(engine: AsyncEngine, database_url: str, tmp_path: Path) -> None:
    await _fill(engine)
    before = (NOW - timedelta(days=30)).isoformat()
    code, said = await asyncio.to_thread(_cli, database_url, "archive", "--before", before, "--to", str(tmp_path))
    assert code == 0 and "archive: 1 sessions" in said, said
    assert (await _rows(engine, OLD))["chat_session_events"] == 3  # archive alone removes nothing
    path = tmp_path / f"{OLD}.jsonl.gz"
    assert _verify_file(path)[0] == 0

    content = gzip.decompress(path.read_bytes())
    at = content.index(b'"payload_text":"') + len(b'"payload_text":"') + 3
    edited = tmp_path / "edited.jsonl.gz"
    edited.write_bytes(gzip.compress(content[:at] + bytes([content[at] ^ 0x01]) + content[at + 1:]))
    code, said = _verify_file(edited)
    assert code == 1 and "BROKEN" in said, said

    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # a byte of the compressed stream: bad deflate data or the gzip check fails
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(bytes(raw))
    assert _verify_file(damaged)[0] != 0


async def test_retention_unset_keeps_everything(engine: AsyncEngine, database_url: str) -> None:
    await _fill(engine)
    args = _parser().parse_args(["retention"])
    out = io.StringIO()
    assert await asyncio.to_thread(lifecycle_cli.run, args, Settings(upstream_name=UPSTREAM), database_url, out) == 0
    assert "unset" in out.getvalue()
    assert (await _rows(engine, OLD))["chat_session_events"] == 3


async def test_a_day_whose_sessions_all_leave_is_dropped_whole_and_a_day_with_one_in_use_is_not(
    engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    """Retention by partition (docs/lifecycle.md): day A's two old sessions leave with their partition
    (DETACH, DROP: no DELETE of their events), day B keeps its partition for its warm session while its old
    one leaves by DELETE, today's recent session stays; every table is emptied of what left; chains of
    what stays verify."""
    today = partitions.utc_today()
    day_a, day_b = today - timedelta(days=45), today - timedelta(days=44)
    await partitions.ensure_partitions(engine)
    for day in (day_a, day_b):
        async with engine.begin() as conn:
            await partitions.create_day(conn, day)
    store = EventStore(engine, UPSTREAM)
    plan = {"ses_day_a1": (day_a, 40, True), "ses_day_a2": (day_a, 41, True), "ses_day_b_old": (day_b, 40, True),
            "ses_day_b_warm": (day_b, 42, False), RECENT: (None, 2, True)}
    for sid, (day, age, release) in plan.items():
        await _session(store, engine, sid, age, release=release, day=day)
    kept_before = {sid: await _rows(engine, sid) for sid in ("ses_day_b_warm", RECENT)}

    code, said = await asyncio.to_thread(_cli, database_url, "retention", "--archive-to", str(tmp_path))
    assert code == 0, said
    report = json.loads(said)
    # day A, and the legacy partition: empty, no session of its day (a fresh database's)
    assert report["retention"]["sessions"] == 3 and report["retention"]["days_dropped"] == 2, said
    assert report["rows"]["chat_session_events"] == 9 and report["retention"]["archived"] == 3, said
    async with engine.connect() as conn:
        names = {day_a: partitions.partition_name(day_a), day_b: partitions.partition_name(day_b),
                 partitions.LEGACY_DAY: partitions.LEGACY}
        exists = {d: (await conn.execute(text("SELECT to_regclass(:n)"), {"n": n})).scalar() is not None
                  for d, n in names.items()}
    assert exists == {day_a: False, day_b: True, partitions.LEGACY_DAY: False}
    for sid in ("ses_day_a1", "ses_day_a2", "ses_day_b_old"):
        assert await _rows(engine, sid) == dict.fromkeys(SESSION_TABLES, 0), sid
        assert _verify_file(tmp_path / f"{sid}.jsonl.gz")[0] == 0
    assert {sid: await _rows(engine, sid) for sid in kept_before} == kept_before
    reader = AuditReader(engine, UPSTREAM)
    assert {sid: verify_chain(await reader.chain_rows(sid)).ok for sid in await reader.session_ids()} == \
        dict.fromkeys(sorted(kept_before), True)
