"""deploy/opencode-bridge.service passes `systemd-analyze verify` and keeps the hardening that
docs/operations.md describes."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.config import ENV_VARS

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "opencode-bridge.service"
ENV_EXAMPLE = REPO / "deploy" / "bridge.env.example"
INSTALLED_EXEC = "/opt/opencode-bridge/.venv/bin/opencode-bridge"


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found:
        return found
    reason = "systemd-analyze not installed (apt-get install -y systemd)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _service_section() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    section = ""
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def test_unit_file_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = _systemd_analyze()
    exe = Path(sys.executable).parent / "opencode-bridge"
    assert exe.exists(), "the console script must be installed (pip install -e .)"
    # The unit names the install path of docs/operations.md; verify checks that ExecStart exists.
    unit = tmp_path / "opencode-bridge.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED_EXEC, str(exe)))
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 0, output
    assert "opencode-bridge.service" not in output, output  # no warnings about our unit either


def test_unit_has_notify_watchdog_restart_and_hardening() -> None:
    s = _service_section()
    assert s["Type"] == ["notify"]
    assert s["Restart"] == ["on-failure"]
    assert s["KillMode"] == ["mixed"]
    assert int(s["WatchdogSec"][0]) > 0 and int(s["TimeoutStopSec"][0]) > 0
    for key in ("NoNewPrivileges", "ProtectSystem", "StateDirectory", "User", "LoadCredential"):
        assert key in s, key
    assert s["ProtectSystem"] == ["strict"]
    assert {c.split(":")[0] for c in s["LoadCredential"]} == {"upstream-password", "auth-secret"}


def test_env_example_documents_every_setting() -> None:
    text = ENV_EXAMPLE.read_text()
    missing = [name for name in ENV_VARS if name not in text]
    assert missing == []
    parser = configparser.ConfigParser()
    parser.read_string("[x]\n" + text)  # plain KEY=VALUE lines only
