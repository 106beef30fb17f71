"""Tables of issue #3 (permission requests and WebSocket fan-out), on the shared metadata of `bridge.store.schema`."""

from __future__ import annotations

from bridge.store.schema import metadata

__all__ = ["metadata"]
