"""deploy/opencode-bridge-retention.{service,timer} pass `systemd-analyze verify` and run the command and
schedule docs/operations.md ("Retention") describes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.unit.test_ops_unit_file import INSTALLED_EXEC, _systemd_analyze

REPO = Path(__file__).resolve().parents[2]
SERVICE = REPO / "deploy" / "opencode-bridge-retention.service"
TIMER = REPO / "deploy" / "opencode-bridge-retention.timer"


def test_retention_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = _systemd_analyze()
    exe = Path(sys.executable).parent / "opencode-bridge"
    service = tmp_path / SERVICE.name
    service.write_text(SERVICE.read_text().replace(INSTALLED_EXEC, str(exe)))
    (tmp_path / TIMER.name).write_text(TIMER.read_text())
    done = subprocess.run([analyze, "verify", str(service), str(tmp_path / TIMER.name)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, (done.stdout + done.stderr).strip()


def test_the_service_runs_retention_once_with_archives_and_metrics() -> None:
    text = SERVICE.read_text()
    assert "Type=oneshot" in text
    assert f"ExecStart={INSTALLED_EXEC} retention --archive-to " in text and "--metrics-file " in text
    assert "OnCalendar=" in TIMER.read_text() and "Persistent=true" in TIMER.read_text()
