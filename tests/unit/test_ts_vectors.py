"""The TypeScript package's reducer is checked against vectors the bridge's own code makes (frames of the
captures and the transcript `GET /v1/sessions/{id}/transcript` builds from the same rows,
tests/support/ts_vectors.py). They are committed so the package's tests run without Python; this test fails
when they are no longer what the bridge's code gives (rewrite them with `python -m tests.support.ts_vectors`)."""

from __future__ import annotations

from tests.support.ts_vectors import VECTORS, expected


def test_the_committed_vectors_are_what_the_bridge_code_gives() -> None:
    want = expected()
    have = {p.name: p.read_text() for p in VECTORS.glob("*.json")}
    assert sorted(have) == sorted(want), "vectors added or gone: python -m tests.support.ts_vectors"
    stale = [name for name, text in want.items() if have[name] != text]
    assert stale == [], f"stale vectors (python -m tests.support.ts_vectors): {stale}"


def test_the_vectors_cover_both_runtimes_questions_removal_and_undo() -> None:
    text = "".join(expected().values())
    for needle in ('"event_type": "message.part.updated"', '"event_type": "session.next.text.ended"',
                   '"question": {', '"removed": true', '"reverted": "from_here"', '"interrupted": true'):
        assert needle in text, needle
