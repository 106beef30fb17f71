"""What an operator installs (`pip install .`, docs/operations.md) is a wheel, not the source tree: it must
carry every module and the Alembic scripts, and migrate a database on its own."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from bridge.store.db import make_engine, schema_is_at_head

REPO = Path(__file__).resolve().parents[2]


def _build_wheel(out: Path) -> Path:
    # From a copy of what a checkout holds: an in-tree build would leave build/ behind, whose stale files
    # end up in later wheels.
    src = out / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("bridge", "migrations"):
        shutil.copytree(REPO / d, src / d, ignore=ignore)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / f, src / f)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out),
         str(src)],
        check=True, timeout=300, cwd=out,
    )
    (wheel,) = out.glob("opencode_bridge-*.whl")
    return wheel


def test_the_wheel_carries_every_module_and_migrates_a_database_on_its_own(
    tmp_path: Path, empty_database_url: str
) -> None:
    wheel = _build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "bridge").rglob("*.py")}
    assert sources - names == set(), "modules missing from the wheel (pyproject.toml [tool.setuptools] packages)"
    versions = {f"bridge/_migrations/versions/{p.name}" for p in (REPO / "migrations" / "versions").glob("*.py")}
    assert versions and versions <= names
    assert {"bridge/_migrations/env.py", "bridge/_migrations/script.py.mako"} <= names

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                    str(wheel)], check=True, timeout=300)
    # Run from elsewhere with only the installed copy (plus the dependencies) importable.
    env = {**os.environ, "PYTHONPATH": str(site), "BRIDGE_DATABASE_URL": empty_database_url}
    where = subprocess.run(
        [sys.executable, "-c", "import bridge.store.db as d; print(d.__file__); print(d.MIGRATIONS_DIR)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert where == [str(site / "bridge" / "store" / "db.py"), str(site / "bridge" / "_migrations")]
    done = subprocess.run([sys.executable, "-m", "bridge", "migrate"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    assert asyncio.run(_at_head(empty_database_url))


async def _at_head(url: str) -> bool:
    engine = make_engine(url)
    try:
        return await schema_is_at_head(engine)
    finally:
        await engine.dispose()
