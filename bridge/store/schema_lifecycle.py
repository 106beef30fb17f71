"""Tables of issue #4 (leases, incarnations, status, legacy gaps) on the metadata of `bridge.store.schema`."""

from __future__ import annotations

from bridge.store.schema import metadata

__all__ = ["metadata"]
