"""The audit API against its own OpenAPI document (a small schemathesis-like check): for every
operation, generated parameters — valid and invalid — get a documented status, never a 5xx, and every
JSON body matches the documented schema."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema_rs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.http.audit import OPENAPI_PATH, AuditContext, add_audit_routes
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore

from .test_audit_store import mirror

SPEC: dict[str, Any] = json.loads(OPENAPI_PATH.read_text())
SECRET = "o" * 40


def conforms(value: Any, schema: dict[str, Any]) -> list[str]:
    """`value` against `schema` of the document (OpenAPI 3.1: JSON Schema 2020-12, `$ref`s into it)."""
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "components": SPEC["components"]}
    return [f"{'/'.join(map(str, e.instance_path)) or '$'}: {e.message}"
            for e in jsonschema_rs.validator_for(root).iter_errors(value)]


def param_values(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    junk = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    if schema.get("type") == "integer":
        return st.one_of(st.integers(-5, 2000).map(str), junk)
    if schema.get("format") == "date-time":
        return st.one_of(st.datetimes().map(lambda d: d.isoformat() + "Z"), junk)
    return junk


def operations() -> list[tuple[str, dict[str, Any]]]:
    # The command routes (tag `commands`) are checked by test_commands_http.py against their own app.
    return [(path, op["get"]) for path, op in SPEC["paths"].items()
            if "get" in op and "commands" not in op["get"].get("tags", [])]


@pytest.fixture
async def api(engine: AsyncEngine, store: EventStore) -> AsyncIterator[tuple[TestClient[Any, Any], str]]:
    sid = await mirror(store, "b-tool-turn")
    app = web.Application()
    add_audit_routes(app, AuditContext(AuditReader(engine, store.upstream), SECRET))
    client: TestClient[Any, Any] = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield client, sid
    finally:
        await client.close()


@pytest.mark.parametrize(("path", "op"), operations(), ids=[p for p, _ in operations()])
async def test_operation_answers_documented_statuses_and_schemas(
    api: tuple[TestClient[Any, Any], str], store: EventStore, path: str, op: dict[str, Any]
) -> None:
    client, sid = api
    token = mint_token(SECRET, store.upstream, None, 600)
    query_params = [p for p in op.get("parameters", []) if p["in"] == "query"]
    seen: set[int] = set()

    loop = asyncio.get_running_loop()

    async def call(url: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        async with client.get(url, params=query, headers=headers) as r:
            return r.status, await r.json()

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        query=st.fixed_dictionaries({}, optional={p["name"]: param_values(p["schema"]) for p in query_params}),
        session=st.sampled_from([sid, "ses_unknown", "x"]),
        authed=st.booleans(),
    )
    # Always tried as well: an authorised request for the mirrored session with no parameters, so the
    # 200 answer's schema is checked on every run, not only when the random draws happen to be valid.
    @example(query={}, session=sid, authed=True)
    def check(query: dict[str, str], session: str, authed: bool) -> None:
        url = path.replace("{session_id}", session)
        headers = {"Authorization": f"Bearer {token}"} if authed else {}
        # Hypothesis runs on a worker thread; the request runs on the test's loop, where the server is.
        status, body = asyncio.run_coroutine_threadsafe(call(url, query, headers), loop).result(30)
        seen.add(status)
        assert str(status) in op["responses"], (url, query, status, body)
        schema = op["responses"][str(status)]["content"]["application/json"]["schema"]
        assert conforms(body, schema) == [], (url, query, body)

    await asyncio.to_thread(check)
    assert 200 in seen
