"""The layers hold: `lint-imports` checks the contracts in pyproject.toml ([tool.importlinter]: the layers
top to bottom, and no import cycle between sibling modules or packages), so an upward import fails the
build here as well as in `make lint`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the tree under `root` before the installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def _copy_tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "bridge", tmp_path / "bridge", ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_import_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    write = root / "bridge" / "store" / "writes" / "transaction.py"
    write.write_text(write.read_text() + "\nfrom bridge.sessions.registry import WarmRegistry  # noqa\n")
    result = _lint_imports(root)
    assert result.returncode == 1
    assert "bridge layers, top to bottom BROKEN" in result.stdout
    assert "bridge.store.writes.transaction -> bridge.sessions.registry" in result.stdout


def test_a_cycle_between_sibling_modules_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    hub = root / "bridge" / "fanout" / "queue.py"
    hub.write_text(hub.read_text() + "\nimport bridge.fanout.hub  # noqa\n")
    result = _lint_imports(root)
    assert result.returncode == 1
    assert "no import cycles between sibling modules or packages BROKEN" in result.stdout
