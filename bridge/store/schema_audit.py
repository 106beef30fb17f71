"""Tables of the audit (docs/audit.md: audit views and the per-session hash chain), on the shared
metadata of `bridge.store.schema`."""

from __future__ import annotations

from bridge.store.schema import metadata

__all__ = ["metadata"]
