"""Session commands beyond talking (docs/commands.md "Session commands", docs/upstream.md §20, §22): rename,
undo (revert / unrevert), fork, and a slash command. Pure parsing here; the upstream calls are
`bridge.upstream.commands.UpstreamCommands.session_op`.

Each is a command like any other: a `command_id`, stored before the upstream call, exactly once, audited,
scoped. `title`, `revert`, `unrevert` and `fork` need `control` (they change what the session is);
`slash_command` is a prompt (`prompt` scope): it runs a turn with the command's template. There is no shell
command: `POST /session/{id}/shell` runs any command line on the serve's machine outside the permission
rules a tool call goes through, which no product token should be able to do (docs/commands.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

SESSION_OP_SCOPES: dict[str, str] = {
    "title": "control",
    "revert": "control",
    "unrevert": "control",
    "fork": "control",
    "slash_command": "prompt",
}
MAX_TITLE_CHARS = 500
MAX_ARGUMENTS_CHARS = 32_000

# (method, path tail under /session/{id}, body) of each operation, given the parsed args: the legacy routes
# OpenCode's own clients use for these (docs/upstream.md §20, §22).
Route = tuple[str, str, dict[str, Any] | None]


def route(name: str, args: Mapping[str, Any], upstream_id: str | None) -> Route:
    """The upstream call of a session command; `upstream_id`: the message id derived from the command
    (a slash command's message, so a retry re-sends the same message: docs/commands.md "Exactly once")."""
    return ROUTES[name]({**args, "upstream_message_id": upstream_id})


def _title(a: Mapping[str, Any]) -> Route:
    return "PATCH", "", {"title": a["title"]}


def _revert(a: Mapping[str, Any]) -> Route:
    return "POST", "revert", {"messageID": a["message_id"]}


def _unrevert(a: Mapping[str, Any]) -> Route:
    return "POST", "unrevert", {}


def _fork(a: Mapping[str, Any]) -> Route:
    return "POST", "fork", {"messageID": a["message_id"]} if "message_id" in a else {}


def _slash(a: Mapping[str, Any]) -> Route:
    return "POST", "command", {"messageID": a["upstream_message_id"], "command": a["command"],
                               "arguments": a["arguments"]}


ROUTES: dict[str, Callable[[Mapping[str, Any]], Route]] = {
    "title": _title, "revert": _revert, "unrevert": _unrevert, "fork": _fork, "slash_command": _slash,
}


def session_op_args(name: str, body: Mapping[str, Any], string: Callable[..., str | None],
                    ident: Callable[..., str | None]) -> dict[str, Any]:
    """The canonical args of a session command (`string`/`ident`: the command model's field checks)."""
    if name == "title":
        return {"title": string(body, "title", MAX_TITLE_CHARS)}
    if name == "revert":
        return {"message_id": ident(body, "message_id")}
    if name == "fork":
        message_id = ident(body, "message_id", required=False)
        return {} if message_id is None else {"message_id": message_id}
    if name == "slash_command":
        arguments = body.get("arguments", "")
        if arguments == "":
            return {"command": ident(body, "command"), "arguments": ""}
        return {"command": ident(body, "command"), "arguments": string(body, "arguments", MAX_ARGUMENTS_CHARS)}
    return {}


def result_body(name: str, command_id: str, session_id: str, args: Mapping[str, Any],
                got: Any) -> dict[str, Any]:
    """What the client gets back: the ids it needs, never the upstream's whole answer."""
    info = got if isinstance(got, dict) else {}
    out: dict[str, Any] = {"command_id": command_id, "session_id": session_id}
    if name == "title":
        out["title"] = args["title"]
    elif name in ("revert", "unrevert"):
        revert = info.get("revert")
        out["revert"] = ({"message_id": revert.get("messageID"), "part_id": revert.get("partID")}
                         if isinstance(revert, dict) else None)
    elif name == "fork":
        out["forked_session_id"] = info.get("id") if isinstance(info.get("id"), str) else None
    elif name == "slash_command":
        out.update(command=args["command"], message_id=args["upstream_message_id"])
    return out
