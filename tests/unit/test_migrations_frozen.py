"""Migrations are frozen: they import nothing from `bridge`, so changing the code never changes what an
old revision does; the copies they hold must still agree with the code they were taken from."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

from bridge.store.hash_chain import GENESIS, link

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, VERSIONS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_migration_imports_the_bridge_package() -> None:
    offenders = {p.name: [m for m in _imports(p) if m == "bridge" or m.startswith("bridge.")]
                 for p in sorted(VERSIONS.glob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_chain_link_frozen_in_0004_is_the_one_the_writer_and_verifier_use() -> None:
    m = _load("0004_audit")
    assert m.GENESIS == GENESIS
    for args in [(GENESIS, 1, "evt_a", '{"a": 1}'), ("f" * 64, 2**40, "evt_ü", '{"t": "\\u00e9 \ud800"}')]:
        assert m.link(*args) == link(*args)
