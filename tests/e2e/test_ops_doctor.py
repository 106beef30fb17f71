"""`opencode-bridge doctor` against a real opencode serve: a wrong password and a default model without
a credential are reported as failures with a fix; a healthy set-up passes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.config import load_settings
from bridge.ops.doctor import Check, run_doctor
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeFactory, OpencodeServe

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def doctor_cli(database_url: str, upstream_url: str, password: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    env.update(BRIDGE_DATABASE_URL=database_url, BRIDGE_UPSTREAM_URL=upstream_url, BRIDGE_UPSTREAM_PASSWORD=password,
               BRIDGE_LOG_LEVEL="warning")
    return subprocess.run([sys.executable, "-m", "bridge", "doctor"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


async def test_doctor_passes_on_a_healthy_setup_and_reports_a_wrong_password(
    opencode_factory: OpencodeFactory, database_url: str
) -> None:
    serve = await opencode_factory(password="right-password")
    done = await asyncio.to_thread(doctor_cli, database_url, serve.base_url, "right-password")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok    upstream version: opencode 1.18.33" in done.stdout
    assert "ok    default model: mock/mock-1" in done.stdout
    assert "ok    migrations: at head" in done.stdout

    done = await asyncio.to_thread(doctor_cli, database_url, serve.base_url, "wrong-password")
    assert done.returncode == 1
    assert "FAIL  upstream auth: 401: the upstream refused our username/password" in done.stdout
    assert "fix: set BRIDGE_UPSTREAM_PASSWORD" in done.stdout

    checks = by_name(await run_doctor(load_settings({"BRIDGE_UPSTREAM_URL": serve.base_url}), database_url))
    assert not checks["upstream auth"].ok and "none is configured" in checks["upstream auth"].detail


async def test_doctor_reports_a_default_model_whose_provider_has_no_credential(
    opencode_bin: Path, mock_llm: MockLLM, tmp_path: Path, database_url: str
) -> None:
    serve = OpencodeServe(opencode_bin, tmp_path / "nocred", mock_llm.base_url,
                          config_overrides={"model": "anthropic/claude-sonnet-4-5"})
    await serve.start()
    try:
        env = {"BRIDGE_UPSTREAM_URL": serve.base_url}
        checks = by_name(await run_doctor(load_settings(env), database_url))
    finally:
        await serve.close()
    model = checks["default model"]
    assert not model.ok
    assert "anthropic/claude-sonnet-4-5" in model.detail and "'anthropic' has no credential" in model.detail
    assert "opencode auth login" in model.fix
    assert checks["upstream auth"].ok and checks["database"].ok and checks["clock"].ok
