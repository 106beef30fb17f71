"""Where a session may be opened (docs/security.md, "Directories"): the allow-list of
`BRIDGE_ALLOWED_DIRECTORIES` and the shape every directory must have. Pure apart from `resolve`, which the
caller injects (`os.path.realpath` in the daemon: symlinks resolved where the bridge sees the filesystem).

The serve treats a session's directory as the project root and loads `opencode.json` and `.opencode/`
from it (plugins, MCP commands, a provider `baseURL`, permission rules): a directory a client chooses
freely is code execution on the host. So a directory is taken only if it is
- normalised: absolute, no `.` or `..` segment, no `//`, no trailing `/`, no control character or NUL;
- at or under one of the configured roots, before and after symlinks are resolved.

Attachments reuse `path_problem` and `inside` (a file must stay inside its session's directory).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

ENV = "BRIDGE_ALLOWED_DIRECTORIES"
SEPARATOR = ":"  # as PATH: a root cannot contain ':' (docs/security.md)
MAX_PATH_CHARS = 4096
# What a path may not hold: C0 and C1 controls, DEL, and the invisible format characters that can make a
# path look like another (soft hyphen, zero-width, bidi controls, line/paragraph separators, BOM).
_BAD_CHARS = "\\x00-\\x1f\\x7f-\\x9f\\xad\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u2069\\ufeff"
_UNPRINTABLE = re.compile(f"[{_BAD_CHARS}]")
# path_problem as one regular expression (the OpenAPI document's `Directory`; tests/unit/test_contract_rules.py
# keeps the two equal): `/`, or segments of allowed characters, none of them `.` or `..`.
_CHAR = f"[^/{_BAD_CHARS}]"
_NOT_DOT = f"[^./{_BAD_CHARS}]"
PATH_PATTERN = f"^(?:/|(?:/(?:{_NOT_DOT}{_CHAR}*|\\.{_NOT_DOT}{_CHAR}*|\\.\\.{_CHAR}+))+)$"


class DirectoryRefused(ValueError):
    """`code` is `bad_request` (the path is malformed) or `forbidden` (well-formed, not allowed)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def path_problem(path: str) -> str | None:
    """Why `path` is not a normalised absolute path, or None."""
    if not path or len(path) > MAX_PATH_CHARS:
        return f"a path is 1 to {MAX_PATH_CHARS} characters"
    if _UNPRINTABLE.search(path):  # NUL, CR, LF, ESC, every control and invisible format character
        return "a path must not contain control characters"
    if not path.startswith("/"):
        return "a path must be absolute"
    if path != "/" and path.endswith("/"):
        return "a path must not end with '/'"
    if "//" in path:
        return "a path must not contain '//'"
    if any(seg in (".", "..") for seg in path.split("/")):
        return "a path must not contain '.' or '..' segments"
    return None


def inside(path: str, root: str) -> bool:
    """`path` is `root` or below it (both normalised): `/srv/ab` is not inside `/srv/a`."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def parse_roots(raw: str) -> tuple[str, ...]:
    """The roots of `BRIDGE_ALLOWED_DIRECTORIES` (`:`-separated); ValueError naming what is wrong.
    `/` is refused: it would allow every directory, which is what the list exists to prevent."""
    roots = tuple(r for r in (part.strip() for part in raw.split(SEPARATOR)) if r)
    for root in roots:
        problem = path_problem(root)
        if problem is not None:
            raise ValueError(f"{root!r}: {problem}")
        if root == "/":
            raise ValueError("'/' would allow every directory: list the directories projects live under")
    return roots


def check_directory(path: str, roots: Iterable[str],
                    resolve: Callable[[str], str] | None = None) -> str:
    """The directory to open a session at: `path` itself, or what it resolves to (symlinks followed by
    `resolve`), which must also be inside a (resolved) root. DirectoryRefused otherwise."""
    roots = tuple(roots)
    if not roots:
        raise DirectoryRefused("forbidden", f"session creation is off: {ENV} is not set (docs/security.md)")
    problem = path_problem(path)
    if problem is not None:
        raise DirectoryRefused("bad_request", f"directory: {problem}")
    if not any(inside(path, root) for root in roots):
        raise DirectoryRefused("forbidden", f"directory is not at or under a root of {ENV}")
    if resolve is None:
        return path
    real = resolve(path)
    if not any(inside(real, resolve(root)) for root in roots):
        raise DirectoryRefused("forbidden", f"directory resolves (symlinks) outside the roots of {ENV}")
    return real


def realpath(path: str) -> str:
    """The resolver the daemon uses: existing components' symlinks followed, the rest kept as written."""
    return os.path.realpath(path)
