"""The fields of the session's content kinds, read from the upstream payload (pure; docs/upstream.md §20, §22).

`content_fields(ev)` gives, per kind, what a transcript, a WebSocket frame and the viewer show of an
attachment, a patch, a subtask, a compaction, a retry, a shell run, an undo, a removal, a todo list, a diff
summary or a session's parent/title/revert — read from the part of a legacy `message.part.updated` or from
the `data` of the event. Wrong-shaped fields are left out; nothing here raises on data.

A file part may carry its bytes inline (`url: "data:…;base64,…"`): such a url is never copied into fields,
only its scheme (`"data"`) and size; frames and transcripts name the file, they never carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridge.events.chat import ChatEvent
from bridge.events.kinds import Kind

Fields = dict[str, Any]


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _kept(values: Fields) -> Fields:
    return {k: v for k, v in values.items() if v is not None}


def _part(ev: ChatEvent) -> dict[str, Any]:
    """The legacy part of a `message.part.updated`, else the v2 `data` itself."""
    return _obj(ev.data.get("part")) if ev.type == "message.part.updated" else ev.data


def file_fields(part: dict[str, Any]) -> Fields:
    """`filename`, `mime`, `url` (a `file:`/`http(s):` url only), `url_scheme`, `inline_bytes` (length of an
    inline data url, never its content) and `source` `{type, path}`."""
    url = _str(part.get("url"))
    scheme = url.split(":", 1)[0].lower() if url is not None and ":" in url else None
    source = _obj(part.get("source"))
    return _kept({
        "filename": _str(part.get("filename")),
        "mime": _str(part.get("mime")),
        "url": url if scheme in ("file", "http", "https") else None,
        "url_scheme": scheme,
        "inline_bytes": len(url) if scheme == "data" and url is not None else None,
        "source": _kept({"type": _str(source.get("type")), "path": _str(source.get("path"))}) or None,
    })


def _files(value: object) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [f for f in value if isinstance(f, str)]


def _patch(ev: ChatEvent) -> Fields:
    part = _part(ev)
    return _kept({"hash": _str(part.get("hash")), "files": _files(part.get("files"))})


def _file(ev: ChatEvent) -> Fields:
    return file_fields(_part(ev))


def _subtask(ev: ChatEvent) -> Fields:
    part = _part(ev)
    return _kept({"prompt": _str(part.get("prompt")), "description": _str(part.get("description")),
                  "agent": _str(part.get("agent")), "command": _str(part.get("command"))})


def _compaction(ev: ChatEvent) -> Fields:
    part = _part(ev)
    auto = part.get("auto")
    return _kept({"auto": auto if isinstance(auto, bool) else None, "reason": _str(part.get("reason")),
                  "summary": _str(part.get("text"))})


def _retry(ev: ChatEvent) -> Fields:
    part = _part(ev)
    error = _obj(part.get("error"))
    message = _str(error.get("message")) or _str(_obj(error.get("data")).get("message"))
    return _kept({"attempt": _int(part.get("attempt")), "retry_error": message})


def _shell(ev: ChatEvent) -> Fields:
    return _kept({"command": _str(ev.data.get("command")), "output": _str(ev.data.get("output"))})


def revert_fields(info: dict[str, Any]) -> Fields | None:
    """`info.revert` of a session: `{message_id, part_id?}` ("reverted from here"), or None."""
    revert = info.get("revert")
    if not isinstance(revert, dict):
        return None
    return _kept({"message_id": _str(revert.get("messageID")), "part_id": _str(revert.get("partID"))})


def _session(ev: ChatEvent) -> Fields:
    info = _obj(ev.data.get("info"))
    return _kept({"title": _str(info.get("title")), "parent_id": _str(info.get("parentID")),
                  "revert": revert_fields(info)})


def todo_items(value: object) -> list[dict[str, Any]]:
    """A todo list (`todo.updated` data.todos, `GET /session/{id}/todo`): `{content, status, priority}`."""
    items = value if isinstance(value, list) else []
    return [_kept({"content": _str(t.get("content")), "status": _str(t.get("status")),
                   "priority": _str(t.get("priority")), "id": _str(t.get("id"))})
            for t in items if isinstance(t, dict)]


def diff_items(value: object) -> list[dict[str, Any]]:
    """A diff summary (`session.diff` data.diff, `GET /session/{id}/diff`): per file, the path and the
    counts — never the before/after contents."""
    items = value if isinstance(value, list) else []
    return [_kept({"file": _str(d.get("file")), "additions": _int(d.get("additions")),
                   "deletions": _int(d.get("deletions")), "status": _str(d.get("status"))})
            for d in items if isinstance(d, dict)]


def _todos(ev: ChatEvent) -> Fields:
    return {"todos": todo_items(ev.data.get("todos"))}


def _diff(ev: ChatEvent) -> Fields:
    return {"diff": diff_items(ev.data.get("diff"))}


def task_child(part: dict[str, Any]) -> str | None:
    """The child session a `task` tool call runs (`state.metadata.sessionId`, docs/upstream.md §20)."""
    return _str(_obj(_obj(part.get("state")).get("metadata")).get("sessionId"))


def _tool(ev: ChatEvent) -> Fields:
    return _kept({"child_session_id": task_child(_part(ev))})


_CONTENT: dict[Kind, Callable[[ChatEvent], Fields]] = {
    Kind.FILE_ATTACHED: _file,
    Kind.PATCH: _patch,
    Kind.SUBTASK: _subtask,
    Kind.COMPACTION: _compaction,
    Kind.COMPACTION_START: _compaction,
    Kind.COMPACTION_END: _compaction,
    Kind.RETRY: _retry,
    Kind.SHELL_START: _shell,
    Kind.SHELL_END: _shell,
    Kind.SESSION_CREATED: _session,
    Kind.SESSION_UPDATED: _session,
    Kind.TODO_UPDATED: _todos,
    Kind.LEGACY_SESSION_DIFF: _diff,
    Kind.FILE_EDITED: lambda ev: _kept({"file": _str(ev.data.get("file"))}),
    Kind.COMMAND_EXECUTED: lambda ev: _kept({"command": _str(ev.data.get("name")),
                                             "arguments": _str(ev.data.get("arguments"))}),
    Kind.TOOL_START: _tool,
    Kind.TOOL_SUCCESS: _tool,
    Kind.TOOL_FAIL: _tool,
    Kind.LEGACY_PART_UPDATED: _tool,
}


CONTENT_KINDS: frozenset[Kind] = frozenset(_CONTENT)  # the kinds with content fields


def content_fields(ev: ChatEvent) -> Fields:
    """The content fields of `ev` (empty for kinds without any); see the module docstring."""
    extract = _CONTENT.get(ev.kind)
    return extract(ev) if extract is not None else {}
