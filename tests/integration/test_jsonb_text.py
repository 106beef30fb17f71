"""The writer hashes its own text of each payload (bridge.store.jsonb_text) before the INSERT: that text
must be PostgreSQL's `payload::text` exactly, and where it is not (or Python cannot tell), the chain is
computed by PostgreSQL instead — the stored chain verifies either way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import pool, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bridge.store import payload as payload_mod
from bridge.store.db import to_async_url
from bridge.store.hash_chain import verify_chain
from bridge.store.jsonb_text import jsonb_text
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore
from tests.conftest import run_sync
from tests.support.chat_events import RECEIVED_AT, SESSION, chat_event

VALUES: list[Any] = [
    {"b": 1, "a": 2, "aa": 3, "é": 4, "z": 5, "ab": 6, "€uro": 7, "zz": {"y": [], "x": {}}},
    {"text": 'quote " backslash \\ slash / tab \t nl \n cr \r bs \b ff \f bell \x07 del \x7f', "k": "\u2028 ü 🙂"},
    {"n": [0, -1, 2**63, 10**30, 1.5, 0.1, 123456.789, -2.25, 1.0, 0.0, True, False, None]},
    {"nested": [[{"b": [1, {"d": 1, "c": 2}]}], []], "": "empty key", " ": "space"},
    {"timestamp": 1796005510301, "sessionID": "ses_x", "prompt": {"text": "MOCK:tool Run echo"}},
]
NOT_CANONICAL: list[Any] = [{"f": 1e-05}, {"f": 1e300}, {"f": -0.0}, {"f": 2.5e20}]


@pytest.mark.parametrize("value", VALUES)
async def test_the_text_python_produces_is_the_text_postgresql_prints(engine: AsyncEngine, value: Any) -> None:
    ours = jsonb_text(value)
    assert ours is not None
    async with engine.connect() as conn:
        theirs = (await conn.execute(text("SELECT CAST(:v AS jsonb)::text"), {"v": ours})).scalar_one()
    assert ours == theirs


@pytest.mark.parametrize("value", NOT_CANONICAL)
def test_floats_postgresql_prints_otherwise_are_left_to_postgresql(value: Any) -> None:
    assert jsonb_text(value) is None


async def test_the_chain_verifies_whoever_computed_each_link(store: EventStore, engine: AsyncEngine) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    events = [chat_event(i + 1, data={"extra": v}) for i, v in enumerate(VALUES + NOT_CANONICAL)]
    await store.write_batch(SESSION, epoch, events[:5], RECEIVED_AT)
    await store.write_batch(SESSION, epoch, events[5:], RECEIVED_AT)
    report = verify_chain(await AuditReader(engine, store.upstream).chain_rows(SESSION))
    assert report.ok and report.events == len(events)


async def test_a_text_postgresql_prints_otherwise_is_caught_and_relinked(
    store: EventStore, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wrong "canonical" text (compact separators): PostgreSQL names the rows, their session is relinked.
    monkeypatch.setattr(payload_mod, "jsonb_text", lambda v: payload_mod._ENCODER.encode(v))
    epoch, _ = await store.claim(SESSION, "owner-1")
    await store.write_batch(SESSION, epoch, [chat_event(1), chat_event(2)], RECEIVED_AT)
    report = verify_chain(await AuditReader(engine, store.upstream).chain_rows(SESSION))
    assert report.ok and report.events == 2


# Generated documents: any JSON PostgreSQL can store (no NUL, no lone surrogate), keys of every length and
# script (the key-order cache is filled and hit), nesting, numbers of every kind. jsonb reads the plain
# `json.dumps` text: PostgreSQL's `::text` of it is compared with ours.
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_keys = st.one_of(st.sampled_from(["a", "b", "aa", "id", "seq", "é", "€uro", "", "type", "data"]),
                  st.text(_chars, max_size=6))
_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(_chars, max_size=12))
_documents = st.recursive(_leaves, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                          st.dictionaries(_keys, kids, max_size=6)), max_leaves=25)


async def _postgres_texts(url: str, docs: list[str]) -> list[str]:
    engine = create_async_engine(to_async_url(url), poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT CAST(d AS jsonb)::text FROM unnest(CAST(:docs AS text[]))"
                                           " WITH ORDINALITY AS t(d, i) ORDER BY i"), {"docs": docs})
            return [r[0] for r in rows]
    finally:
        await engine.dispose()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_documents, min_size=1, max_size=25))
def test_generated_documents_print_as_postgresql_prints_them(database_url: str, values: list[Any]) -> None:
    ours = [jsonb_text(v) for v in values]
    theirs = run_sync(_postgres_texts(database_url, [json.dumps(v) for v in values]))
    for value, mine, pg in zip(values, ours, theirs, strict=True):
        if mine is not None:  # None: a float Python prints otherwise, PostgreSQL links it (tested above)
            assert mine == pg, value
