"""The layers hold: `lint-imports` checks the contracts in pyproject.toml ([tool.importlinter]: the layers
top to bottom, and no import cycle between sibling modules or packages), so an upward import fails the
build here as well as in `make lint`."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
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
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert f"{len(contracts)} kept, 0 broken" in result.stdout


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


def face_imports(source: str, module: str, faces: set[str]) -> list[str]:
    """The imports of a module that go through its own package's face (`faces`: the packages whose
    `__init__` imports something; `from bridge.store.writes import x` inside bridge.store.writes, or an
    enclosing package's): the face imports the module back, a cycle through `__init__`. A submodule imports
    from the module that defines the name instead."""
    packages = {module.rsplit(".", i)[0] for i in range(1, module.count("."))} & faces
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else (
            [a.name for a in node.names] if isinstance(node, ast.Import) and any(a.asname is None for a in node.names)
            else [])
        found += [f"{module} -> {n}" for n in names if n in packages]
    return found


def _faces() -> set[str]:
    return {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "bridge").rglob("__init__.py")
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.parse(init.read_text()).body)}


def test_no_module_imports_its_own_package_face() -> None:
    faces, found = _faces(), []
    assert {"bridge.events", "bridge.store.writes", "bridge.store.chat_sessions"} <= faces
    for path in sorted((ROOT / "bridge").rglob("*.py")):
        if path.name != "__init__.py":
            found += face_imports(path.read_text(), ".".join(path.relative_to(ROOT).with_suffix("").parts), faces)
    assert found == []


def test_an_import_through_the_package_face_is_found() -> None:
    faces = {"bridge.store", "bridge.store.writes"}
    source = "from bridge.store.writes import rejects as q\nfrom bridge.store.writes.chain import x\n"
    assert face_imports(source, "bridge.store.writes.transaction", faces) == [
        "bridge.store.writes.transaction -> bridge.store.writes"]
    assert face_imports("from bridge.store import notices\n", "bridge.store.writes.event_store", faces) == [
        "bridge.store.writes.event_store -> bridge.store"]
    assert face_imports("import bridge.store.writes.rejects as q\n", "bridge.store.writes.transaction", faces) == []
    assert face_imports("from bridge.fanout import hub\n", "bridge.fanout.queue", faces) == []  # no face
