"""The tests' own wait (tests/support/waiting.py): the first truthy value ends it, an ignored error counts as
"not yet", any other error ends it at once, and the timeout names the last value and error. The async wait
and its blocking twin share one bookkeeping; both are run here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.waiting import WaitTimeout, wait_until, wait_until_sync


def _answers(*values: Any) -> Callable[[], Any]:
    """A predicate answering `values` in turn (raising those that are exceptions), then the last for ever."""
    seen = list(values)

    def predicate() -> Any:
        value = seen.pop(0) if len(seen) > 1 else seen[0]
        if isinstance(value, BaseException):
            raise value
        return value
    return predicate


async def test_the_first_truthy_value_is_returned_from_a_plain_or_a_coroutine_predicate() -> None:
    assert await wait_until(_answers(0, "", ["x"]), timeout=5, interval=0) == ["x"]
    plain = _answers(None, 7)

    async def coroutine() -> Any:
        return plain()
    assert await wait_until(coroutine, timeout=5, interval=0) == 7
    assert wait_until_sync(_answers(False, {"k": 1}), timeout=5, interval=0) == {"k": 1}


async def test_an_ignored_error_is_not_yet_and_another_error_ends_the_wait() -> None:
    assert await wait_until(_answers(ConnectionError("down"), 3), timeout=5, interval=0,
                            ignore=(ConnectionError,)) == 3
    assert wait_until_sync(_answers(ConnectionError("down"), 3), timeout=5, interval=0,
                           ignore=(ConnectionError,)) == 3
    with pytest.raises(KeyError):
        await wait_until(_answers(0, KeyError("k"), 1), timeout=5, interval=0, ignore=(ConnectionError,))
    with pytest.raises(KeyError):
        wait_until_sync(_answers(0, KeyError("k"), 1), timeout=5, interval=0, ignore=(ConnectionError,))


async def test_the_timeout_names_the_condition_the_last_value_and_the_last_error() -> None:
    with pytest.raises(WaitTimeout) as caught:
        await wait_until(_answers(0, ConnectionError("refused")), timeout=0.05, interval=0.01,
                         message="the server", ignore=(ConnectionError,))
    assert caught.value.last_value == 0 and isinstance(caught.value.last_error, ConnectionError)
    assert "within 0.05 s: the server" in str(caught.value) and "ConnectionError: refused" in str(caught.value)
    with pytest.raises(WaitTimeout) as caught_sync:
        wait_until_sync(_answers(ConnectionError("refused"), []), timeout=0.05, interval=0.01,
                        ignore=(ConnectionError,))
    assert caught_sync.value.last_value == [] and caught_sync.value.last_error is None


async def test_a_zero_timeout_still_polls_once() -> None:
    assert await wait_until(_answers(5), timeout=0) == 5
    assert wait_until_sync(_answers(5), timeout=0) == 5
    with pytest.raises(WaitTimeout):
        await wait_until(_answers(0), timeout=0)
