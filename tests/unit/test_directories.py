"""The directory allow-list (bridge.directories): shapes, roots, symlinks. Pure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.config import load_settings
from bridge.directories import DirectoryRefused, check_directory, inside, parse_roots, path_problem
from bridge.errors import ConfigError

ROOTS = ("/srv/projects", "/home/dev/work")


@pytest.mark.parametrize("path", ["/srv/projects", "/srv/projects/a", "/srv/projects/a b/ü-1.2", "/"])
def test_normalised_absolute_paths_have_no_problem(path: str) -> None:
    assert path_problem(path) is None


@pytest.mark.parametrize(("path", "why"), [
    ("", "1 to"), ("srv/projects", "absolute"), ("./x", "absolute"), ("/srv/projects/", "end with '/'"),
    ("//etc", "'//'"), ("/srv//projects", "'//'"), ("/srv/projects/..", "'..'"), ("/srv/projects/../../etc", "'..'"),
    ("/srv/./projects", "'.'"), ("/srv/projects/a\x00", "control"), ("/srv/projects/a\nb", "control"),
    ("/srv/projects/a\rb", "control"), ("/srv/projects/\x1b[31mred", "control"), ("/srv/\u202eevil", "control"),
    ("/" + "a" * 5000, "1 to"),
])
def test_every_unnormalised_path_is_named(path: str, why: str) -> None:
    problem = path_problem(path)
    assert problem is not None and why in problem


def test_inside_is_by_segment_not_by_prefix() -> None:
    assert inside("/srv/projects", "/srv/projects") and inside("/srv/projects/a/b", "/srv/projects")
    assert not inside("/srv/projects-evil", "/srv/projects") and not inside("/srv", "/srv/projects")


@pytest.mark.parametrize(("path", "code"), [
    ("/srv/projects/app", None), ("/home/dev/work", None),
    ("/", "forbidden"), ("/etc", "forbidden"), ("/root", "forbidden"), ("/srv/projects-evil", "forbidden"),
    ("/srv/a/../../..", "bad_request"), ("//etc", "bad_request"), ("/srv/projects/app/", "bad_request"),
    ("/srv/projects/a\x1b", "bad_request"), ("/srv/projects/a\x00", "bad_request"), ("relative", "bad_request"),
])
def test_check_against_the_roots(path: str, code: str | None) -> None:
    if code is None:
        assert check_directory(path, ROOTS) == path
        return
    with pytest.raises(DirectoryRefused) as e:
        check_directory(path, ROOTS)
    assert e.value.code == code


def test_no_roots_refuses_every_directory_naming_the_variable() -> None:
    with pytest.raises(DirectoryRefused) as e:
        check_directory("/srv/projects/app", ())
    assert e.value.code == "forbidden" and "BRIDGE_ALLOWED_DIRECTORIES" in e.value.message


def test_a_symlink_inside_a_root_pointing_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    (root / "alias").symlink_to(root / "real")
    roots = (str(root),)
    assert check_directory(str(root / "real"), roots, os.path.realpath) == str(root / "real")
    assert check_directory(str(root / "alias"), roots, os.path.realpath) == str(root / "real")  # resolved
    assert check_directory(str(root / "new" / "dir"), roots, os.path.realpath) == str(root / "new" / "dir")
    with pytest.raises(DirectoryRefused) as e:
        check_directory(str(root / "escape"), roots, os.path.realpath)
    assert e.value.code == "forbidden" and "symlinks" in e.value.message
    with pytest.raises(DirectoryRefused):
        check_directory(str(root / "escape" / "deeper"), roots, os.path.realpath)


def test_a_root_that_is_itself_a_symlink_is_resolved_too(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    assert check_directory(str(tmp_path / "link" / "p"), (str(tmp_path / "link"),), os.path.realpath) \
        == str(tmp_path / "data" / "p")


def test_roots_are_colon_separated_and_checked_at_start() -> None:
    assert parse_roots("/srv/projects:/home/dev/work") == ROOTS
    assert parse_roots(" /srv/projects : ") == ("/srv/projects",)
    assert parse_roots("") == ()
    for bad in ("/", "relative", "/srv/../etc", "/srv/projects/"):
        with pytest.raises(ValueError):
            parse_roots(bad)
        with pytest.raises(ConfigError) as e:
            load_settings({"BRIDGE_ALLOWED_DIRECTORIES": bad})
        assert "BRIDGE_ALLOWED_DIRECTORIES" in str(e.value)
    assert load_settings({"BRIDGE_ALLOWED_DIRECTORIES": "/srv/projects"}).directory_roots == ("/srv/projects",)
