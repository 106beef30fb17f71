"""JSON text built by PostgreSQL by concatenation, for the replay frames (bridge.store.reads.replay).

`jsonb_build_object` of twenty-odd fields and `jsonb_strip_nulls` around it were most of what a frame cost
PostgreSQL (BENCHMARKS.md, "Replay of real sessions"): each builds and sorts a binary object to be printed
right away. A frame is text on the wire, so it is printed directly: `concat_ws` skips a NULL, so a field
whose value is NULL is left out, as `jsonb_strip_nulls` left it out; strings are escaped by `to_json`.
"""

from __future__ import annotations

from collections.abc import Sequence


def value(expr: str) -> str:
    """A text, number or boolean expression as JSON text (NULL stays NULL)."""
    return f"to_json({expr})::text"


def jsonb(expr: str) -> str:
    """A jsonb expression as JSON text (NULL stays NULL; never a JSON null here: callers leave those out)."""
    return f"({expr})::text"


def _terms(members: Sequence[tuple[str | None, str]]) -> str:
    return ",\n        ".join(expr if key is None else f"'\"{key}\":' || {expr}" for key, expr in members)


def obj(members: Sequence[tuple[str | None, str]]) -> str:
    """A JSON object of `(key, JSON text expression)`, members whose expression is NULL left out; a key of
    None: the expression is `members(...)` of its own, spliced in place."""
    return f"('{{' || concat_ws(',',\n        {_terms(members)}) || '}}')"


def members(members: Sequence[tuple[str | None, str]]) -> str:
    """Members of an object as `obj` prints them, for a CASE to choose a group of them at once (NULL: none)."""
    return f"nullif(concat_ws(',',\n        {_terms(members)}), '')"
