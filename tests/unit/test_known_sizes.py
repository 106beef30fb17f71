"""The sessions sync-log bodies name (bridge.upstream.known_sizes), pure: sizes only grow, bad ids are never
remembered, and a full memory keeps the larger half."""

from __future__ import annotations

from bridge.upstream.known_sizes import KnownSizes


def test_sizes_only_grow_and_bad_ids_are_not_remembered() -> None:
    known = KnownSizes()
    known.note_sizes({"ses_A": 5, "../x": 9})
    known.note_size("ses_A", 3)
    known.note_size("ses_B", 2)
    assert dict(known.view()) == {"ses_A": 5, "ses_B": 2} and len(known) == 2
    known.note_size("ses_A", 7)
    assert known.view()["ses_A"] == 7


def test_a_full_memory_keeps_the_larger_half() -> None:
    known = KnownSizes(limit=4)
    known.note_sizes({f"ses_{i}": i for i in range(4)})
    known.note_size("ses_9", 9)
    assert dict(known.view()) == {"ses_3": 3, "ses_2": 2, "ses_9": 9}
