"""What a command must pass before any row or upstream call (docs/commands.md, docs/security.md): the token's
scope, sessions and approval rights, and a new session's directory against the allow-list."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bridge.auth import Claims
from bridge.commands.model import Command, CommandError, approval_problem, scope_allows
from bridge.directories import DirectoryRefused, check_directory


def authorize(claims: Claims, cmd: Command) -> None:
    if not scope_allows(claims.scope, cmd.name):
        raise CommandError("forbidden", f"a {claims.scope} token may not {cmd.name.replace('_', ' ')}")
    if cmd.session_id is not None and not claims.allows(cmd.session_id):
        raise CommandError("forbidden", f"token does not grant session {cmd.session_id}")
    if cmd.session_id is None and claims.sessions is not None:
        raise CommandError("forbidden", "a token limited to sessions may not create sessions")
    if cmd.name == "permission_reply":
        problem = approval_problem(cmd.args["reply"], claims.approve, claims.sessions is not None)
        if problem is not None:
            raise CommandError("forbidden", problem)


def placed(cmd: Command, directories: tuple[str, ...], resolve: Callable[[str], str] | None) -> Command:
    """A create_session with its directory checked against the allow-list and resolved (symlinks), before
    any row or upstream call (docs/security.md, "Directories"); other commands unchanged."""
    if cmd.name != "create_session":
        return cmd
    try:
        real = check_directory(cmd.args["directory"], directories, resolve)
    except DirectoryRefused as e:
        raise CommandError(e.code, e.message) from None
    return dataclasses.replace(cmd, args={**cmd.args, "directory": real})
