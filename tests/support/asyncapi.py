"""Frames checked against the AsyncAPI document of `/v1/ws` (`bridge/http/asyncapi.json`, docs/websocket.md).

`check_server_frame(frame)` returns what is wrong with a frame the bridge sent (an empty list: it is in the
document): an unknown `type`, a missing or mistyped field, a field the document does not list. The test
WebSocket client (tests/support/fanout_client.py) runs it on every frame it receives and fails the test on
the first one outside the document, so every e2e and integration suite checks the document as it goes.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema_rs

from bridge.http.ws import ASYNCAPI_PATH

DOC: dict[str, Any] = json.loads(ASYNCAPI_PATH.read_text())
FRAME_SCHEMAS: dict[str, str] = DOC["x-frame-types"]  # `type` → schema name
CLIENT_OP_SCHEMAS: dict[str, str] = DOC["x-client-ops"]  # `op` (`command:<name>` for commands) → schema name


@functools.cache
def _validator(schema_name: str) -> Any:
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": f"#/components/schemas/{schema_name}", "components": DOC["components"]}
    return jsonschema_rs.validator_for(root)


def _problems(value: object, schema_name: str) -> list[str]:
    return [f"{'/'.join(map(str, e.instance_path)) or '$'}: {e.message}"
            for e in _validator(schema_name).iter_errors(value)]


def check_server_frame(frame: object) -> list[str]:
    if not isinstance(frame, dict):
        return ["a frame is a JSON object"]
    name = FRAME_SCHEMAS.get(frame.get("type"))  # type: ignore[arg-type]
    if name is None:
        return [f"type {frame.get('type')!r} is not in the AsyncAPI document"]
    return _problems(frame, name)


def check_client_op(op: object) -> list[str]:
    if not isinstance(op, dict):
        return ["an op is a JSON object"]
    key = f"command:{op.get('command')}" if op.get("op") == "command" else op.get("op")
    name = CLIENT_OP_SCHEMAS.get(key)  # type: ignore[arg-type]
    if name is None:
        return [f"op {key!r} is not in the AsyncAPI document"]
    return _problems(op, name)


class FrameOutsideDocument(AssertionError):
    """A frame the bridge sent that `bridge/http/asyncapi.json` does not describe."""


def assert_server_frame(frame: object) -> None:
    problems = check_server_frame(frame)
    if problems:
        raise FrameOutsideDocument(f"frame outside the AsyncAPI document: {problems[:5]} in "
                                   f"{json.dumps(frame)[:600]}")
