"""The TypeScript package (clients/typescript/) from the Python tests: its built `dist/` (built here when
missing: `npm ci` and `npm run build`), and running a Node script that imports it. Under CI=true a missing
npm fails the test; elsewhere it skips it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is needed for the TypeScript package's tests (install Node.js >= 20)")
        pytest.skip(f"{tool} not installed")
    return path


def built_package() -> Path:
    """The package's directory with `node_modules` and a current `dist/`."""
    npm = _need("npm")
    if not (PACKAGE / "node_modules").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE, check=True, capture_output=True)
    if not (PACKAGE / "dist" / "server" / "index.js").exists():
        subprocess.run([npm, "run", "build"], cwd=PACKAGE, check=True, capture_output=True)
    return PACKAGE


def run_node(script: Path, stdin: Any = None, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    """Run `script` with node (it may import `@opencode-bridge/client`: a self-reference of the package, so
    the script must live inside clients/typescript/), feeding `stdin` as JSON; its stdout parsed as JSON."""
    node = _need("node")
    built_package()
    proc = subprocess.run([node, str(script)], input=json.dumps(stdin) if stdin is not None else "", text=True,
                          capture_output=True, timeout=timeout, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"{script.name} failed: {proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


async def run_node_async(script: Path, env: dict[str, str] | None = None, timeout: float = 180) -> Any:
    """`run_node` without blocking the event loop (an async test's in-process servers, e.g. the mock model,
    keep answering while the script runs)."""
    node = _need("node")
    built_package()
    proc = await asyncio.create_subprocess_exec(node, str(script), stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, **(env or {})})
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, f"{script.name} failed: {err.decode()[-3000:]}"
    return json.loads(out)
