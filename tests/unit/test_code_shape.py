"""The house's size rules, read from the code (an AST walk of bridge/): no constructor over 8 parameters
(the rest grouped in small frozen settings objects), no class over 200 lines, no function over 60. What
is left over is named below; each allow-list only shrinks: an entry that no longer breaks its rule fails
the test until it is removed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MAX_PARAMETERS = 8
MAX_CLASS_LINES = 200
MAX_FUNCTION_LINES = 60

WIDE_CONSTRUCTORS: set[str] = set()
LONG_CLASSES: set[str] = set()
LONG_FUNCTIONS: set[str] = set()


def parameters(f: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller can pass (`self` not counted; `*args` and `**kw` count one each)."""
    a = f.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return n - 1


def lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined, no-any-return]


def definitions(tree: ast.Module, prefix: str) -> Iterator[tuple[str, ast.AST]]:
    """Every class and function with its dotted name (methods under their class)."""
    def walk(node: ast.AST, name: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{name}.{child.name}", child
                yield from walk(child, f"{name}.{child.name}")
            else:
                yield from walk(child, name)
    yield from walk(tree, prefix)


def breaches(source: str, module: str) -> tuple[set[str], set[str], set[str]]:
    """(constructors over the bound, classes over it, functions over it) of one module's source."""
    wide, long_classes, long_functions = set(), set(), set()
    for name, node in definitions(ast.parse(source), module):
        if isinstance(node, ast.ClassDef):
            if lines(node) > MAX_CLASS_LINES:
                long_classes.add(name)
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__" and parameters(f) > MAX_PARAMETERS:
                    wide.add(name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and lines(node) > MAX_FUNCTION_LINES:
            long_functions.add(name)
    return wide, long_classes, long_functions


def house() -> tuple[set[str], set[str], set[str]]:
    wide: set[str] = set()
    long_classes: set[str] = set()
    long_functions: set[str] = set()
    for path in sorted((ROOT / "bridge").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        w, c, f = breaches(path.read_text(), module)
        wide |= w
        long_classes |= c
        long_functions |= f
    return wide, long_classes, long_functions


def test_no_constructor_takes_more_than_8_parameters() -> None:
    assert house()[0] == WIDE_CONSTRUCTORS


def test_no_class_is_over_200_lines() -> None:
    assert house()[1] == LONG_CLASSES


def test_no_function_is_over_60_lines() -> None:
    assert house()[2] == LONG_FUNCTIONS


def test_the_walk_finds_what_breaks_each_rule() -> None:
    params = ", ".join(f"p{i}" for i in range(9))
    body = "\n".join(f"        x = {i}" for i in range(MAX_FUNCTION_LINES))
    padding = "\n".join(f"    y{i} = {i}" for i in range(MAX_CLASS_LINES))
    source = (f"class Wide:\n    def __init__(self, {params}) -> None:\n        pass\n\n"
              f"class Narrow:\n    def __init__(self, a, *, b, **kw) -> None:\n        pass\n\n"
              f"class Long:\n{padding}\n\n"
              f"class Host:\n    async def long(self) -> None:\n{body}\n")
    assert breaches(source, "m") == ({"m.Wide"}, {"m.Long"}, {"m.Host.long"})


# Modules whose only test is against PostgreSQL (their SQL), named with where that test is.
TESTED_ELSEWHERE = {"command_service.rows": "tests/integration/test_door_rows.py"}


def test_every_module_of_sessions_and_of_the_command_door_has_a_unit_test_file_of_its_own() -> None:
    missing = []
    for package in ("sessions", "command_service"):
        for path in (ROOT / "bridge" / package).glob("*.py"):
            name = f"{package}.{path.stem}"
            if path.stem == "__init__" or (ROOT / "tests" / "unit" / f"test_{path.stem}.py").exists():
                continue
            if name in TESTED_ELSEWHERE and (ROOT / TESTED_ELSEWHERE[name]).exists():
                continue
            missing.append(name)
    assert sorted(missing) == []
