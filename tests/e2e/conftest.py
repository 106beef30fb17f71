"""Fixtures for end-to-end tests against a real ``opencode serve`` 1.18.33 and the scripted mock provider.

* ``opencode_bin``     (session)  path of the opencode binary; skip locally / fail under CI=true if absent
* ``mock_llm``         (function) in-process :class:`MockLLM` on 127.0.0.1 (requests also logged to a file)
* ``opencode_factory`` (function) ``await opencode_factory(password=..., ...)`` -> started serve; all closed
* ``opencode``         (function) one started :class:`OpencodeServe` bound to ``mock_llm``
* ``db``               (function) an engine on ``database_url`` (the fixture of tests/conftest.py)
* ``bridge_processes`` (function) ``bridge_processes(name="bridge", upstream_url=None, **BRIDGE_env)`` -> a
                                  not yet started :class:`BridgeProcess` on ``opencode`` (or ``upstream_url``),
                                  named for the test module's ``UPSTREAM`` (else "e2e"); all stopped at teardown

When a test fails, the teardown prints the tail of every serve and bridge log it used (shown under
"Captured stdout teardown").
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.bridge_proc import BridgeFactory, BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeFactory, OpencodeServe

DEFAULT_UPSTREAM = "e2e"
DEFAULT_BIN = Path(__file__).resolve().parents[2] / ".opencode" / "node_modules" / ".bin" / "opencode"

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    reports = request.node.stash.get(_REPORTS, {})
    return any(r.failed for r in reports.values())


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    configured = os.environ.get("OPENCODE_BIN")
    binary = Path(configured) if configured else DEFAULT_BIN
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    reason = (f"opencode binary not found at {binary} (set OPENCODE_BIN, or run `make opencode` to "
              "install opencode-ai@1.18.33 into ./.opencode)")
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture
async def mock_llm(tmp_path: Path) -> AsyncIterator[MockLLM]:
    mock = MockLLM(log_path=tmp_path / "mock-llm.jsonl")
    await mock.start()
    try:
        yield mock
    finally:
        await mock.stop()


@pytest.fixture
async def opencode_factory(opencode_bin: Path, mock_llm: MockLLM, tmp_path: Path,
                           request: pytest.FixtureRequest) -> AsyncIterator[OpencodeFactory]:
    """Make (and by default start) serves bound to ``mock_llm``; every one is stopped at teardown."""
    made: list[OpencodeServe] = []

    async def make(*, name: str = "opencode", password: str | None = None, username: str | None = None,
                   start: bool = True) -> OpencodeServe:
        serve = OpencodeServe(opencode_bin, tmp_path / name, mock_llm.base_url,
                              password=password, username=username)
        made.append(serve)
        if start:
            await serve.start()
        return serve

    try:
        yield make
    finally:
        for serve in made:
            await serve.close()
        if _failed(request):
            for serve in made:
                print(f"\n--- tail of {serve.log_path} ---\n{serve.log_tail(80)}")


@pytest.fixture
def db(engine: AsyncEngine) -> AsyncEngine:
    """The test's database (`database_url`), to read what the bridge processes stored."""
    return engine


@pytest.fixture
async def opencode(opencode_factory: OpencodeFactory) -> OpencodeServe:
    """A started ``opencode serve`` (fresh HOME + git project) whose provider is ``mock_llm``."""
    return await opencode_factory()


@pytest.fixture
def bridge_processes(tmp_path: Path, database_url: str, opencode: OpencodeServe,
                     request: pytest.FixtureRequest) -> Iterator[BridgeFactory]:
    """Bridge processes on ``opencode`` and the test's database; ``env`` adds or overrides BRIDGE_* settings."""
    made: list[BridgeProcess] = []
    upstream = getattr(request.module, "UPSTREAM", DEFAULT_UPSTREAM)

    def make(name: str = "bridge", upstream_url: str | None = None, **env: str) -> BridgeProcess:
        b = BridgeProcess(tmp_path, upstream_url or opencode.base_url, database_url, name=name,
                          extra_env={"BRIDGE_UPSTREAM_NAME": upstream, **env})
        made.append(b)
        return b

    try:
        yield make
    finally:
        for b in made:
            b.stop()
        if _failed(request):
            for b in made:
                print(f"\n--- tail of {b.log_path} ---\n{b.log_tail(40)}")
