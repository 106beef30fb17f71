"""A bridge that cannot go on says why in one structured log line (`bridge_crashed`, with the exception and
without secrets) and exits non-zero, so systemd restarts it and the journal shows the cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.opencode import free_port


def test_a_bridge_that_cannot_start_logs_bridge_crashed_without_secrets_and_exits_non_zero(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "BRIDGE_STATE_DIR": str(tmp_path),
        "BRIDGE_DATABASE_URL": f"postgresql://bridge:hunter2-secret@127.0.0.1:{free_port()}/none",
        "BRIDGE_HTTP_PORT": str(free_port()),
        "BRIDGE_LOG_FORMAT": "json",
        "BRIDGE_WORKERS": "1",
    }
    done = subprocess.run([sys.executable, "-m", "bridge", "run"], env=env, capture_output=True, text=True,
                          timeout=120)
    out = done.stdout + done.stderr
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    crashed = [e for e in events if e.get("event") == "bridge_crashed"]
    assert done.returncode != 0
    assert len(crashed) == 1 and "Traceback" in crashed[0]["exception"]
    assert "hunter2-secret" not in out
