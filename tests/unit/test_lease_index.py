"""bridge.sessions.lease_index: the keeper's questions answered as its walks answer them, for any state."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.sessions.lease_index import not_renewed, strays

sids = st.sampled_from([f"ses_{i}" for i in range(8)])
epochs = st.dictionaries(sids, st.integers(1, 3), max_size=8)


def test_nothing_differs_nothing_is_named() -> None:
    assert not_renewed({"ses_a": 2}, {"ses_a": 2, "ses_b": 1}) == []
    assert list(strays({"ses_a": object(), "ses_b": object()}, {"ses_a": 2})) == []


def test_a_lease_taken_or_moved_on_is_not_renewed_and_a_lease_without_a_session_is_a_stray() -> None:
    assert not_renewed({"ses_a": 2, "ses_b": 4, "ses_c": 1}, {"ses_a": 2, "ses_b": 5}) == ["ses_b", "ses_c"]
    assert list(strays({"ses_a": object()}, {"ses_a": 2, "ses_x": 9})) == ["ses_x"]


@settings(max_examples=400, deadline=None)
@given(epochs, epochs, st.sets(sids))
def test_the_same_answers_as_the_walks(ours: dict[str, int], held: dict[str, int], warm: set[str]) -> None:
    assert not_renewed(ours, held) == [sid for sid, e in ours.items() if held.get(sid) != e]
    assert list(strays(dict.fromkeys(warm), held)) == [sid for sid in held if sid not in warm]
