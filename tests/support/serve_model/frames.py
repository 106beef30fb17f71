"""The serve's wire vocabulary, pure: every frame and answer body a fake sends, in the captures' shapes
(fixtures/opencode-1.18.33; docs/upstream.md §3, §6, §14, §15).

JSON is compact with keys in insertion order, like the real server's (see the captures' `*.sse`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

MAX_SEQ = 2**53 - 1  # the largest `after` / cutoff the serve accepts (docs/upstream.md §14)
MAX_NAMED = 996  # the real serve answers 996 named aggregates and fails a 997th (docs/upstream.md §14)
HISTORY_PAGE_MAX = 100  # `/history`'s `limit` is capped here (docs/upstream.md §3)
LIVE_CONNECTED = b'data: {"id":"evt_connected","type":"server.connected","data":{}}\n\n: heartbeat\n\n'
Answer = tuple[int, dict[str, Any]]  # (HTTP status, JSON body)


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sse(obj: Any) -> bytes:
    """One SSE frame: `data: <one-line JSON>\\n\\n`, the only form the serve sends (docs/upstream.md §3.3)."""
    return f"data: {dumps(obj)}\n\n".encode()


def sync_item(env: dict[str, Any]) -> dict[str, Any]:
    """The sync-log item of a durable envelope (docs/upstream.md §14)."""
    d = env["durable"]
    return {"id": env["id"], "aggregate_id": d["aggregateID"], "seq": d["seq"],
            "type": f"{env['type']}.{d.get('version', 1)}", "data": env["data"]}


def iso(data: dict[str, Any]) -> dict[str, Any]:
    """A v2 payload as /global/event carries it: `timestamp` as an ISO string (docs/legacy.md)."""
    ts = data.get("timestamp")
    if not isinstance(ts, int):
        return data
    text = datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts % 1000:03d}Z"
    return {**data, "timestamp": text}


def global_frames(env: dict[str, Any], directory: str | None) -> list[dict[str, Any]]:
    """The `/global/event` frames of one event: its bus copy and, if persisted, its sync twin (§15)."""
    d = env.get("durable")
    v2 = env["type"].startswith("session.next.")
    data = iso(env.get("data", {})) if v2 else env.get("data", {})
    where = {"directory": directory} if directory is not None else {}
    frames = [{**where, "payload": {"id": env["id"], "type": env["type"], "properties": data}}]
    if isinstance(d, dict):
        twin = {"id": env["id"], "type": f"{env['type']}.{d.get('version', 1)}", "seq": d["seq"],
                "aggregateID": d["aggregateID"], "data": data}
        frames.append({**where, "payload": {"type": "sync", "syncEvent": twin, "id": env["id"]}})
    return frames


def global_server_frame(event_id: str, type_: str = "server.connected") -> bytes:
    """`server.connected` (first on every `/global/event`) or `server.heartbeat` (§15)."""
    return f'data: {{"payload":{{"id":"{event_id}","type":"{type_}","properties":{{}}}}}}\n\n'.encode()


def parse_after(raw: str) -> int | None:
    """A query's `after` / `limit`: empty is 0; anything but a digit string up to MAX_SEQ is None."""
    if raw == "":
        return 0
    return int(raw) if raw.isdigit() and int(raw) <= MAX_SEQ else None


def session_not_found(sid: str) -> Answer:
    return 404, {"_tag": "SessionNotFoundError", "sessionID": sid, "message": f"Session not found: {sid}"}


def invalid_query(name: str = "after") -> Answer:  # j-errors/11-history-after=abc.json
    return 400, {"_tag": "InvalidRequestError", "message": f'Expected an integer, got NaN\n  at ["{name}"]',
                 "kind": "Query"}


def bad_payload(message: str) -> Answer:  # the shape of `/sync/history`'s 400 (docs/upstream.md §14)
    return 400, {"name": "BadRequest", "data": {"message": message, "kind": "Payload"}}


def too_many_named() -> Answer:  # the real serve's 500 for a body naming more than MAX_NAMED (§14)
    return 500, {"name": "UnknownError", "data": {"message": "Expression tree is too large (maximum depth 1000)"}}


def no_route(path: str) -> Answer:
    return 404, {"name": "NotFoundError", "data": {"message": f"no route {path}"}}


def injected(status: int, route: str) -> Answer:
    """A fault plan's error answer (not a shape of the serve's: a test tells it from a real one)."""
    return status, {"_tag": "InjectedError", "message": f"injected {status} on {route}"}
