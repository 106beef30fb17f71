from __future__ import annotations

import pytest

# `backend`: the store ports' contract suites (test_port_*.py) run on PostgreSQL and on the in-memory twin
from tests.support.store_ports import backend  # noqa: F401

UPSTREAM = "it-upstream"  # the shared `store` fixture (tests/conftest.py) follows a module's UPSTREAM


@pytest.fixture(params=["insert", "copy"])
def write_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a write-path test on both ways rows go in (bridge.store.writes.transaction): the INSERT path (small groups,
    clashes) and the COPY path (large groups), whatever the size of the test's groups."""
    from bridge.store.writes import transaction as write

    monkeypatch.setattr(write, "COPY_MIN_ROWS", 10**9 if request.param == "insert" else 1)
    return str(request.param)
