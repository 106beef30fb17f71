"""The command rows' and the prompt queue's twins against PostgreSQL on generated histories (docs/ports.md):
any sequence of claims, state moves, send claims (taken, renewed, released, aged past the window), drops,
completions and upstream id changes gives the same answer at every step, and leaves the same rows, on both.
(Creation and completion times are the clocks' own and are left out of the comparison.)"""

from __future__ import annotations

import itertools
from dataclasses import asdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.commands.legacy_delivery import CLAIM_WINDOW_S
from bridge.commands.model import Command
from bridge.store.db import make_engine
from bridge.store.memory import MemoryTables
from bridge.store.ports import CommandKey, PromptRow
from tests.conftest import run_sync
from tests.support.store_ports import Backend

SESSIONS = ("ses_a", "ses_b")
STATES = ("pending", "queued", "sending", "done", "failed", "dropped")
_examples = itertools.count()
_TIMES = ("created_at", "completed_at", "sent_at")

# few commands, claimed before the history, so that it meets the same rows again and again (ids per subject
# and per session: test_port_commands.py)
KEYS = (("c-1", "alice", "ses_a"), ("c-2", "alice", "ses_a"), ("c-3", "alice", "ses_b"))
_cmd = st.sampled_from(KEYS)
_op = st.one_of(
    st.tuples(st.just("claim"), _cmd, st.sampled_from([None, "msg_x", "msg_y"])),
    st.tuples(st.just("move"), _cmd, st.sets(st.sampled_from(STATES), min_size=1, max_size=2),
              st.sampled_from(STATES), st.booleans()),
    st.tuples(st.just("send_claim"), _cmd, st.sampled_from(["t-1", "t-2"])),
    st.tuples(st.just("renew"), _cmd, st.sampled_from(["t-1", "t-2"])),
    st.tuples(st.just("release"), _cmd, st.sampled_from(["t-1", "t-2"])),
    st.tuples(st.just("age"), _cmd),
    st.tuples(st.just("drop"), st.sampled_from(SESSIONS)),
    st.tuples(st.just("complete"), _cmd, st.sampled_from(["done", "failed"])),
    st.tuples(st.just("replace"), _cmd, st.sampled_from(["msg_x", "msg_y"]), st.sampled_from(["msg_y", "msg_z"])),
    st.tuples(st.just("heads")),
    st.tuples(st.just("ahead"), _cmd),
)


def _prompt(row: PromptRow | None) -> Any:
    return None if row is None else {k: v for k, v in asdict(row).items() if k not in _TIMES}


async def _step(b: Backend, op: tuple[Any, ...]) -> Any:
    rows, queue = b.commands(), b.queue()
    name, *args = op
    if name in ("drop", "heads"):
        return (sorted(await queue.drop_queued(args[0], "test")) if name == "drop"
                else [_prompt(r) for r in await queue.heads()])
    cid, subject, sid = args[0]
    cmd, key = Command("prompt", cid, sid, {"text": cid}), CommandKey(subject, sid, cid)
    if name == "claim":
        return await rows.claim(cmd, subject, "prompt", args[1], sid)
    if name == "move":
        values = {"result": {"state": "queued"}} if args[3] else {}
        return await queue.move(key, sorted(args[1]), args[2], announce=args[2], **values)
    if name == "send_claim":
        action, before = await queue.claim(key, args[1])
        return action, _prompt(before)
    if name == "renew":
        return await queue.renew(key, args[1])
    if name == "release":
        return await queue.release(key, args[1])
    if name == "age":
        return await b.age_send_claim(key, CLAIM_WINDOW_S + 1)
    if name == "complete":
        return await rows.complete(key, state=args[1], http_status=200, result={"state": args[1]})
    if name == "replace":
        return await rows.replace_upstream_id(key, args[1], args[2])
    return await queue.queued_ahead(sid, key)


async def _run_both(database_url: str, ops: list[tuple[Any, ...]]) -> tuple[list[Any], list[Any]]:
    engine = make_engine(database_url)
    try:
        pg = Backend("postgres", engine=engine, upstream=f"cmd-diff-{next(_examples)}")
        mem = Backend("memory", tables=MemoryTables())
        answers: tuple[list[Any], list[Any]] = ([], [])
        for op in [("claim", key, None) for key in KEYS] + ops:
            for b, out in zip((pg, mem), answers, strict=True):
                out.append((op, await _step(b, op)))
        for b, out in zip((pg, mem), answers, strict=True):
            for sid in SESSIONS:
                listed = await b.commands().for_session(sid)
                out.append((sid, [{k: v for k, v in r.items() if k not in _TIMES} for r in listed]))
            out.extend([await b.command(CommandKey(subject, sid, cid)) for cid, subject, sid in KEYS])
        return answers
    finally:
        await engine.dispose()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=20))
def test_every_history_answers_the_same_on_postgresql_and_on_the_twins(database_url: str,
                                                                        ops: list[tuple[Any, ...]]) -> None:
    on_postgres, on_twins = run_sync(_run_both(database_url, ops))
    assert on_twins == on_postgres
