"""What alembic compares against the declared schema (migrations/env.py, tests/migration): the partitions of
`chat_session_events` are made by the bridge at run time (bridge.store.partitions, docs/lifecycle.md
"Partitions"), not declared in bridge.store.schema, so the comparison leaves them out."""

from __future__ import annotations

from typing import Any


def is_partition_name(name: str | None) -> bool:
    """A partition of `chat_session_events` (`…_legacy`, `…_default`, `…_pYYYYMMDD`): created by the bridge,
    not declared here (alembic's comparison leaves them out: `migrations/env.py`)."""
    return name is not None and name.startswith("chat_session_events_")


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """alembic's `include_name` hook: everything but the partitions and their indexes."""
    if type_ == "table":
        return not is_partition_name(name)
    if type_ in ("index", "unique_constraint"):
        return not is_partition_name(parent_names.get("table_name"))
    return True
